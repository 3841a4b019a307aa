"""Reconnection with exponential backoff (seed 002: 1 s base, 30 s cap, 10 % jitter,
up to 10 attempts).

``BackoffPolicy`` is the pure rule: the delay before reconnection attempt *n*
(1-based) is ``base * 2**(n-1)``, jittered by up to ``±jitter`` of itself, and
never more than ``cap``: attempt 1 waits 0.9 to 1.1 s, attempt 2 1.8 to 2.2 s, …,
attempt 6 and later 27 to 30 s. ``Reconnects`` counts attempts for one stream and
sleeps; its clock and randomness are injected so tests need no real waiting.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Sleep = Callable[[float], Awaitable[None]]
Random = Callable[[], float]


@dataclass(frozen=True)
class BackoffPolicy:
    """How long to wait before each reconnection, and how many to try.

    Attributes:
        base: seconds before the first attempt.
        cap: the longest wait, in seconds.
        jitter: fraction of a delay added or removed at random (0.1 = ±10 %).
        max_attempts: attempts after which the stream gives up.
    """

    base: float = 1.0
    cap: float = 30.0
    jitter: float = 0.1
    max_attempts: int = 10

    def __post_init__(self) -> None:
        if self.base <= 0 or self.cap < self.base:
            raise ValueError("backoff needs 0 < base <= cap")
        if not 0 <= self.jitter < 1:
            raise ValueError("backoff jitter must be in [0, 1)")
        if self.max_attempts < 0:
            raise ValueError("backoff max_attempts must not be negative")

    def delay(self, attempt: int, unit_random: float) -> float:
        """Seconds to wait before ``attempt`` (1-based).

        Args:
            attempt: which reconnection attempt this is, from 1.
            unit_random: a number in [0, 1) (``random.random()``); 0.5 means no jitter.
        """
        if attempt < 1:
            raise ValueError("attempts count from 1")
        exponent = min(attempt - 1, 62)  # 2**62 s is past any cap
        raw = min(self.cap, self.base * 2.0**exponent)
        jittered = raw * (1.0 + self.jitter * (2.0 * unit_random - 1.0))
        return min(self.cap, max(0.0, jittered))


class Reconnects:
    """The reconnection attempts of one stream.

    Args:
        policy: delays and the attempt limit.
        sleep: awaited with each delay (default ``asyncio.sleep``).
        rand: returns a number in [0, 1) (default ``random.random``).
    """

    def __init__(
        self, policy: BackoffPolicy, *, sleep: Sleep | None = None, rand: Random | None = None
    ) -> None:
        self.policy = policy
        self._sleep = sleep or asyncio.sleep
        self._rand = rand or random.random
        self.attempts = 0
        self.delays: list[float] = []

    @property
    def exhausted(self) -> bool:
        """True when no attempt is left."""
        return self.attempts >= self.policy.max_attempts

    async def wait(self, at_least: float | None = None) -> int:
        """Wait before the next attempt and count it; returns its number.

        Args:
            at_least: a server's ``Retry-After``: the wait is not shorter (nor
                longer than the cap).

        Raises:
            RuntimeError: no attempt is left (check ``exhausted`` first).
        """
        if self.exhausted:
            raise RuntimeError("no reconnection attempt left")
        self.attempts += 1
        delay = self.policy.delay(self.attempts, self._rand())
        if at_least is not None:
            delay = min(self.policy.cap, max(delay, at_least))
        self.delays.append(delay)
        await self._sleep(delay)
        return self.attempts

    def reset(self) -> None:
        """The stream is healthy again: the next break starts from the base delay."""
        self.attempts = 0
