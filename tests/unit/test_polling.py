"""The shared wait helper gives up when it should, so no test can hang on it."""

from __future__ import annotations

import pytest

from tests.polling import eventually

pytestmark = [pytest.mark.unit]


async def test_returns_the_first_truthy_value_of_a_sync_or_async_probe() -> None:
    seen = iter([None, 0, "ready"])
    assert await eventually(lambda: next(seen), what="sync", interval=0) == "ready"

    async def probe() -> dict[str, int]:
        return {"n": 1}

    assert await eventually(probe, what="async") == {"n": 1}


async def test_fails_at_the_deadline_naming_what_was_awaited() -> None:
    with pytest.raises(AssertionError, match=r"the answer: not seen within 0\.05s"):
        await eventually(lambda: False, what="the answer", timeout=0.05, interval=0.01)


async def test_fails_at_once_when_the_awaited_party_is_gone() -> None:
    with pytest.raises(AssertionError, match="worker polls: gave up"):
        await eventually(lambda: False, what="worker polls", timeout=60, alive=lambda: False)
