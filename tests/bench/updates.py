"""``/updates`` of 1000 messages of a real run: time plain and gzip, and the ratio.

The messages are those of a real agent run on this stack: an in-process worker
runs two research agents in a row (offline model scripted to reason for many turns, each
turn's text streamed as STREAMING_CHUNK messages, a ``search_notes`` or
``calculator`` call per turn whose real result is posted, the node's reports),
and the newest 1000 messages it stored are served from a stream of their own
(the same stored bytes, so the count is exactly 1000 whatever the run's total).
``compact=false`` serves every one of them (the default drops the chunks a final
THOUGHT superseded). The mix of message types is printed with the figures.

Timings: the first (cold) request of each encoding, then the median of
``repeat`` more; a gzip response's body is decompressed and compared with the
plain one.
"""

from __future__ import annotations

import collections
import gzip
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from spindle.gateway.streams.history import stored_type
from spindle.shared.bus.message_bus import MessageBus, stream_key
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import ChatMessage, ToolCall
from spindle.worker.llm.base import LlmRequest, LlmResponse, LlmUsage
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker

QUEUE = "bench-updates"
MESSAGES = 1000
TURNS = 50  # per agent node, two nodes: ~1,200 messages (chunking depends on timing)
DOCS = Path(__file__).resolve().parents[2] / "docs"
QUESTIONS = (
    "how long does Temporal keep a workflow history",
    "what does a graph node cost",
    "how does a client resume a stream",
    "what is archived in MongoDB",
)


def _sentences() -> list[str]:
    """Prose for the model to 'write': the project's own documentation, line by line."""
    lines: list[str] = []
    for path in sorted(DOCS.glob("*.md")):
        for raw_line in path.read_text(encoding="utf-8").splitlines():
            line = raw_line.strip()
            if len(line) > 60 and not line.startswith(("|", "```", "#")):
                lines.append(line)
    return lines


class Researcher(OfflineProvider):
    """Reasons for ``turns`` turns, a tool call each, before answering (streamed)."""

    def __init__(self, turns: int) -> None:
        # Paced like a model (~330 tokens/s): a reply that came whole before
        # the first chunk was due would be posted only as its final message.
        super().__init__(token_delay=0.003)
        self.turns = turns
        self.prose = _sentences()

    def respond(self, request: LlmRequest) -> LlmResponse:
        turn = sum(m.role == "assistant" for m in request.messages) + 1
        start = (turn * 4) % max(1, len(self.prose) - 4)
        text = " ".join(self.prose[start : start + 4])
        usage = LlmUsage(prompt_tokens=40 * turn, completion_tokens=len(text.split()))
        if turn >= self.turns:
            return LlmResponse(
                message=ChatMessage(role="assistant", content=f"In short: {text}"),
                model="bench",
                usage=usage,
            )
        if turn % 3 == 0:
            call = ToolCall(
                id=f"c{turn}", name="calculator", arguments={"expression": f"{turn} * 17 + 3"}
            )
        else:
            query = QUESTIONS[turn % len(QUESTIONS)]
            call = ToolCall(id=f"c{turn}", name="search_notes", arguments={"query": query})
        message = ChatMessage(role="assistant", content=text, tool_calls=[call])
        return LlmResponse(message=message, model="bench", usage=usage)


def _agent(node_id: str, turns: int, prompt: str) -> dict[str, Any]:
    return {
        "id": node_id,
        "type": "agent",
        "params": {"tools": ["search_notes", "calculator"], "max_turns": turns, "prompt": prompt},
    }


def _graph(turns: int) -> dict[str, Any]:
    return {
        "name": "bench-updates",
        "entry": "researcher",
        "nodes": [
            _agent("researcher", turns, "Research how Spindle streams messages."),
            _agent("reviewer", turns, "Check the research and write the answer."),
            {"id": "answer", "type": "output", "params": {"select": "reviewer"}},
        ],
        "edges": [
            {"from": "researcher", "to": "reviewer"},
            {"from": "reviewer", "to": "answer"},
        ],
    }


async def _real_run_messages(client: Client, settings: Settings, bus: MessageBus) -> list[bytes]:
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    run_id = f"bench-updates-{uuid.uuid4()}"
    worker = build_worker(
        client, settings, bus=bus, archive=archive, llm=Researcher(TURNS), task_queue=QUEUE
    )
    async with worker:
        result = await client.execute_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=parse_graph(_graph(TURNS)), input={}),
            id=run_id,
            task_queue=QUEUE,
            result_type=GraphRunResult,
        )
    if result.status != "completed":
        raise RuntimeError(f"updates bench run ended {result.status}: {result.error}")
    await archive.close()
    # Redis keeps the run's newest history_max_messages (1000 by default).
    stored = [m.raw for m in await bus.history(run_id)]
    if len(stored) < MESSAGES:
        raise RuntimeError(
            f"the bench run stored {len(stored)} messages, fewer than {MESSAGES}: {_mix(stored)}"
        )
    return stored[-MESSAGES:]


def _mix(raws: list[bytes]) -> dict[str, int]:
    counts = collections.Counter(AgentMessageType(stored_type(raw)).name for raw in raws)
    return dict(counts.most_common())


async def bench_updates(
    client: Client, settings: Settings, base_url: str, repeat: int = 20
) -> dict[str, Any]:
    """Cold and warm ``/updates`` times, plain and gzip, of 1000 messages of a real run."""
    bus = MessageBus.from_settings(settings)
    raws = await _real_run_messages(client, settings, bus)
    stream_id = f"bench-hist-{uuid.uuid4().hex}"
    await bus.set_meta(stream_id, {"run_id": "bench", "tenant_id": "default", "graph": "bench"})
    async with bus.redis.pipeline(transaction=True) as pipe:
        pipe.rpush(stream_key(stream_id, "log"), *raws)
        pipe.set(stream_key(stream_id, "seq"), len(raws))
        await pipe.execute()
    url = f"{base_url}/runs/{stream_id}/bench/updates"
    timings: dict[str, list[float]] = {"gzip": [], "identity": []}
    bodies: dict[str, bytes] = {}
    sizes: dict[str, int] = {}
    async with httpx.AsyncClient(timeout=30) as http:
        for encoding in ("identity", "gzip"):
            for _ in range(repeat + 1):
                start = time.perf_counter()
                async with http.stream(
                    "GET",
                    url,
                    params={"compact": "false"},
                    headers={"Accept-Encoding": encoding},
                ) as resp:
                    resp.raise_for_status()
                    raw_body = b"".join([chunk async for chunk in resp.aiter_raw()])
                timings[encoding].append((time.perf_counter() - start) * 1000)
            sizes[encoding] = len(raw_body)
            bodies[encoding] = gzip.decompress(raw_body) if encoding == "gzip" else raw_body
    if bodies["gzip"] != bodies["identity"]:
        raise RuntimeError("/updates served different messages with gzip")
    count = bodies["identity"].count(b'{"ts":')
    if count != MESSAGES:
        raise RuntimeError(f"/updates returned {count} messages, expected {MESSAGES}")
    await bus.delete_stream(stream_id)
    await bus.close()
    plain, packed = (
        statistics.median(timings["identity"][1:]),
        statistics.median(timings["gzip"][1:]),
    )
    return {
        "messages": MESSAGES,
        "mix": _mix(raws),
        "identity_first_ms": round(timings["identity"][0], 2),
        "gzip_first_ms": round(timings["gzip"][0], 2),
        "identity_ms": round(plain, 2),
        "gzip_ms": round(packed, 2),
        "gzip_time_ratio": round(packed / plain, 2),
        "identity_bytes": sizes["identity"],
        "gzip_bytes": sizes["gzip"],
        "compression_ratio": round(sizes["identity"] / sizes["gzip"], 2),
    }
