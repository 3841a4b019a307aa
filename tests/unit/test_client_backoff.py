"""The SDK's reconnection policy (seed 002: 1 s base, 30 s cap, 10 % jitter, 10 attempts),
with randomness and sleeping injected: nothing waits for real."""

from __future__ import annotations

import pytest

from spindle.client.backoff import BackoffPolicy, Reconnects

pytestmark = pytest.mark.unit


def test_defaults_are_seed_002() -> None:
    policy = BackoffPolicy()
    assert (policy.base, policy.cap, policy.jitter, policy.max_attempts) == (1.0, 30.0, 0.1, 10)


def test_delay_doubles_from_the_base_up_to_the_cap_without_jitter() -> None:
    policy = BackoffPolicy()
    # 0.5 is the middle of the jitter range: no jitter at all.
    assert [policy.delay(n, 0.5) for n in range(1, 11)] == [
        1.0,
        2.0,
        4.0,
        8.0,
        16.0,
        30.0,
        30.0,
        30.0,
        30.0,
        30.0,
    ]


@pytest.mark.parametrize(
    ("attempt", "low", "high"), [(1, 0.9, 1.1), (3, 3.6, 4.4), (5, 14.4, 17.6)]
)
def test_jitter_moves_a_delay_by_at_most_ten_percent(attempt: int, low: float, high: float) -> None:
    policy = BackoffPolicy()
    assert policy.delay(attempt, 0.0) == pytest.approx(low)
    assert policy.delay(attempt, 0.999999) == pytest.approx(high, rel=1e-5)
    assert low <= policy.delay(attempt, 0.25) <= high


def test_jitter_never_passes_the_cap() -> None:
    policy = BackoffPolicy()
    assert policy.delay(6, 0.0) == pytest.approx(27.0)
    assert policy.delay(6, 0.999999) == 30.0
    assert policy.delay(60, 0.999999) == 30.0  # no overflow for a huge attempt number


@pytest.mark.parametrize(
    "kwargs",
    [{"base": 0}, {"base": 5, "cap": 1}, {"jitter": 1.0}, {"jitter": -0.1}, {"max_attempts": -1}],
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)  # type: ignore[arg-type]


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError):
        BackoffPolicy().delay(0, 0.5)


async def test_reconnects_sleep_each_delay_and_stop_after_ten_attempts() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    draws = iter([0.0, 1.0 - 1e-9, 0.5] * 4)
    reconnects = Reconnects(BackoffPolicy(), sleep=sleep, rand=lambda: next(draws))
    numbers = []
    while not reconnects.exhausted:
        numbers.append(await reconnects.wait())
    assert numbers == list(range(1, 11))
    assert slept == reconnects.delays
    assert slept[:3] == pytest.approx([0.9, 2.2, 4.0])
    assert slept[5:] == pytest.approx([30.0, 27.0, 30.0, 30.0, 27.0])
    assert sum(slept) < 10 * 30
    with pytest.raises(RuntimeError):
        await reconnects.wait()


async def test_reset_starts_again_from_the_base_delay() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    reconnects = Reconnects(BackoffPolicy(), sleep=sleep, rand=lambda: 0.5)
    for _ in range(4):
        await reconnects.wait()
    reconnects.reset()
    assert not reconnects.exhausted and reconnects.attempts == 0
    await reconnects.wait()
    assert slept == [1.0, 2.0, 4.0, 8.0, 1.0]


async def test_retry_after_lengthens_a_wait_but_not_past_the_cap() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    reconnects = Reconnects(BackoffPolicy(), sleep=sleep, rand=lambda: 0.5)
    await reconnects.wait(at_least=5.0)
    await reconnects.wait(at_least=0.5)
    await reconnects.wait(at_least=120.0)
    assert slept == [5.0, 2.0, 30.0]


async def test_a_policy_of_zero_attempts_is_exhausted_at_once() -> None:
    reconnects = Reconnects(BackoffPolicy(max_attempts=0))
    assert reconnects.exhausted
