"""The worker's event loop: uvloop unless ``SPINDLE_WORKER_EVENT_LOOP=asyncio``."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from spindle.shared.platform.settings import Settings
from spindle.worker.main import event_loop_factory


def test_the_worker_runs_on_uvloop_by_default_and_on_asyncio_when_asked() -> None:
    factory = event_loop_factory(Settings())
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    assert event_loop_factory(Settings(worker_event_loop="asyncio")) is None


def test_an_unknown_event_loop_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPINDLE_WORKER_EVENT_LOOP", "trio")
    with pytest.raises(ValueError, match="SPINDLE_WORKER_EVENT_LOOP"):
        Settings()


def test_a_worker_loop_runs_a_coroutine_on_uvloop() -> None:
    async def running_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    with asyncio.Runner(loop_factory=event_loop_factory(Settings())) as runner:
        assert isinstance(runner.run(running_loop()), uvloop.Loop)
