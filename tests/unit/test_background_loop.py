"""``BackgroundLoop.stop()`` returns even when the loop's work swallowed the cancel."""

from __future__ import annotations

import asyncio

import pytest

from spindle.shared.platform import background_loop
from spindle.shared.platform.background_loop import BackgroundLoop

STOP_TIMEOUT = 10.0


class SwallowingLoop(BackgroundLoop):
    """Each pass awaits work that turns a cancel into an ordinary error, as a
    library call can; the loop logs errors and goes on, like the real loops."""

    name = "swallowing loop"

    def __init__(self) -> None:
        super().__init__()
        self.passes = 0
        self.in_work = asyncio.Event()
        self.swallowed = 0
        self.errors: list[Exception] = []

    async def work(self) -> None:
        self.in_work.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.swallowed += 1
            raise RuntimeError("connection closed") from None

    async def run(self) -> None:
        while True:
            self.stop_if_cancelled()
            self.passes += 1
            try:
                await self.work()
            except Exception as exc:
                await self.after_error(exc)

    async def after_error(self, exc: Exception) -> None:
        self.errors.append(exc)


class StubbornLoop(SwallowingLoop):
    """Its work swallows the first cancel and then blocks again in the same pass."""

    async def after_error(self, exc: Exception) -> None:
        await asyncio.Event().wait()  # still inside the pass: only a new cancel ends it


class FailingLoop(BackgroundLoop):
    def __init__(self) -> None:
        super().__init__()
        self.failing = asyncio.Event()

    async def run(self) -> None:
        self.failing.set()
        raise ValueError("bad configuration")


async def test_a_cancel_swallowed_by_the_loops_work_still_stops_it() -> None:
    loop = SwallowingLoop()
    loop.start()
    await loop.in_work.wait()
    async with asyncio.timeout(STOP_TIMEOUT):
        await loop.stop()
    assert loop.swallowed == 1
    assert loop.passes == 1, "no pass begins after stop()"


async def test_a_pass_blocked_after_swallowing_the_cancel_is_cancelled_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(background_loop, "RECANCEL_SECONDS", 0.05)
    loop = StubbornLoop()
    loop.start()
    await loop.in_work.wait()
    async with asyncio.timeout(STOP_TIMEOUT):
        await loop.stop()
    assert loop.passes == 1
    assert "swallowing loop did not stop when cancelled" in caplog.text


async def test_a_loop_that_died_of_an_error_reports_it_at_stop() -> None:
    loop = FailingLoop()
    loop.start()
    await loop.failing.wait()
    with pytest.raises(ValueError, match="bad configuration"):
        async with asyncio.timeout(STOP_TIMEOUT):
            await loop.stop()


async def test_stop_without_start_and_a_second_stop_do_nothing() -> None:
    loop = SwallowingLoop()
    await loop.stop()
    loop.start()
    await loop.in_work.wait()
    await loop.stop()
    await loop.stop()
    assert loop.passes == 1
