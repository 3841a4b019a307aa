"""Token → browser-visible latency: a STREAMING_CHUNK posted to a run's stream
until its text is in the conversation page of a headless Chromium.

The page is the real one (``GET /ui/``), attached to a stream as a user's page
is: history, a stream token, then ``EventSource``. The benchmark posts one chunk
at a time through the real bus (``MessageBus.post``: the Lua script that stores
and publishes), all of one activity id, as an agent's tokens are. In the page a
``MutationObserver`` on the conversation notes when each chunk's text is in the
DOM, and a ``requestAnimationFrame`` after it when the next frame is drawn. Times
are wall-clock milliseconds on both sides (``time.time()`` before the post;
``performance.timeOrigin + performance.now()`` in the page) on the same machine;
the page clock's offset is estimated first from the quickest of several round
trips and subtracted.

The floor is a bare Redis publish → subscribe of a message of the same size,
measured in the same run (``tests.bench.floor``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.platform.settings import Settings
from tests.bench.floor import redis_pubsub_latencies
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS

ACTIVITY_ID = "bench-llm.1"
WARMUP = 10

# Each chunk's text is " |<n>"; the observer reports every new n once, with the
# time it reached the DOM and the time of the frame after it.
OBSERVE = """
() => {
  const now = () => performance.timeOrigin + performance.now();
  let consumed = 0;
  new MutationObserver(() => {
    const item = document.querySelector("li.msg-chunk .streaming-text");
    if (!item) return;
    const text = item.textContent;
    const fresh = text.slice(consumed);
    consumed = text.length;
    const dom = now();
    for (const match of fresh.matchAll(/\\|(\\d+)/g)) {
      const n = Number(match[1]);
      requestAnimationFrame(() => window.__tokenVisible(n, dom, now()));
    }
  }).observe(document.getElementById("messages"),
             {childList: true, subtree: true, characterData: true});
}
"""


async def _page_clock_offset(page: Any, probes: int = 30) -> float:
    """page clock minus local clock (ms), from the round trip with the smallest RTT."""
    best: tuple[float, float] | None = None
    for _ in range(probes):
        before = time.time() * 1000
        page_now = await page.evaluate("performance.timeOrigin + performance.now()")
        after = time.time() * 1000
        rtt = after - before
        if best is None or rtt < best[0]:
            best = (rtt, page_now - (before + after) / 2)
    assert best is not None
    return best[1]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench_browser_latency(settings: Settings, base_url: str, tokens: int) -> dict[str, Any]:
    """Post ``tokens`` chunks one at a time; p50/p99 until visible, vs the floor."""
    from playwright.async_api import async_playwright

    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run .ci/setup (it installs chromium)")
    bus = MessageBus.from_settings(settings)
    stream_id = f"bench-ui-{uuid.uuid4().hex}"
    await bus.set_meta(stream_id, {"run_id": "bench", "tenant_id": "default", "graph": "bench"})
    await bus.post(stream_id, create_compact_message(AgentMessageType.SYSTEM, "open"))

    loop = asyncio.get_running_loop()
    seen: dict[int, asyncio.Future[tuple[float, float]]] = {}

    def visible(n: int, dom: float, frame: float) -> None:
        future = seen.get(n)
        if future is not None and not future.done():
            future.set_result((dom, frame))

    dom_ms: list[float] = []
    frame_ms: list[float] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        page = await browser.new_page()
        await page.expose_function("__tokenVisible", visible)
        await page.goto(f"{base_url}/ui/#run={stream_id}/bench")
        await page.wait_for_selector("#run-state[data-state='live']")
        await page.evaluate(OBSERVE)
        offset = await _page_clock_offset(page)
        for n in range(WARMUP + tokens):
            seen[n] = loop.create_future()
            chunk = create_compact_message(
                AgentMessageType.STREAMING_CHUNK, f" |{n}", activity_id=ACTIVITY_ID
            )
            sent = time.time() * 1000
            await bus.post(stream_id, chunk)
            dom, frame = await asyncio.wait_for(seen[n], timeout=10)
            if n >= WARMUP:
                dom_ms.append(dom - offset - sent)
                frame_ms.append(frame - offset - sent)
        await browser.close()
    floor = await redis_pubsub_latencies(settings.redis_url, tokens)
    await bus.delete_stream(stream_id)
    await bus.close()
    d50, d99 = _pct(dom_ms, 0.5), _pct(dom_ms, 0.99)
    p50, p99 = _pct(frame_ms, 0.5), _pct(frame_ms, 0.99)
    f50, f99 = _pct(floor, 0.5), _pct(floor, 0.99)
    return {
        "tokens": tokens,
        "page_clock_offset_ms": round(offset, 3),
        "in_dom_p50_ms": round(d50, 2),
        "in_dom_p99_ms": round(d99, 2),
        "next_frame_p50_ms": round(p50, 2),
        "next_frame_p99_ms": round(p99, 2),
        "redis_pubsub_p50_ms": round(f50, 3),
        "redis_pubsub_p99_ms": round(f99, 3),
        "in_dom_p50_ratio": round(d50 / f50, 1),
        "in_dom_p99_ratio": round(d99 / f99, 1),
    }
