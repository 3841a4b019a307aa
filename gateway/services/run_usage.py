"""A run's LLM usage per node and per workstream, and its maps' item counts.

``GET /runs/{workflow_id}/usage`` (the runs page's tokens, cost and map counts)
reads the run's stored messages: every LLM turn posts a THOUGHT (tool calls) or
an ANSWER whose details carry the node, the model, the provider's ``usage``
(prompt and completion tokens) and the turn's ``llm_ms``; a map posts
BATCH_PROGRESS with its node's ``done``/``failed``/``total``. A turn is counted
once per activity id (a retried attempt's message replaces the earlier one). Cost
is the message's ``cost_usd`` when it has one, else the turn's tokens priced
with ``SPINDLE_MODEL_PRICES`` as the worker prices them for budgets
(docs/graphs/budgets.md); an unpriced model costs 0. A workstream's turns (messages
attributed to it, ``w``) are counted under the workstream, not a node of the run.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, Field

from spindle.gateway.streams.history import stored_messages
from spindle.shared.bus.message_bus import MessageBus, StoredMessage
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.platform.settings_sections.llm import ModelPrice
from spindle.shared.store.archive import RunArchive

TURN_TYPES = frozenset({AgentMessageType.THOUGHT, AgentMessageType.ANSWER})


class Usage(BaseModel):
    """LLM turns and what they used."""

    llm_turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = Field(0, description="prompt + completion tokens")
    cost_usd: float = 0.0
    llm_ms: float = Field(0.0, description="time spent waiting for the model")

    def add(self, prompt: int, completion: int, cost: float, llm_ms: float) -> None:
        self.llm_turns += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.tokens += prompt + completion
        self.cost_usd = round(self.cost_usd + cost, 9)
        self.llm_ms = round(self.llm_ms + llm_ms, 3)


class ItemCounts(BaseModel):
    """A map node's latest BATCH_PROGRESS."""

    done: int = 0
    failed: int = 0
    total: int = 0


class RunUsage(BaseModel):
    """``GET /runs/{workflow_id}/usage``."""

    workflow_id: str
    total: Usage = Field(description="every LLM turn of the run, its workstreams' included")
    nodes: dict[str, Usage] = Field(
        default_factory=dict, description="node id → its agent's turns (main workstream)"
    )
    workstreams: dict[str, Usage] = Field(
        default_factory=dict, description="workstream id (ws-1, …) → its agents' turns"
    )
    items: dict[str, ItemCounts] = Field(
        default_factory=dict, description="map node id → its latest item counts"
    )


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _turn_cost(details: dict[str, Any], prices: dict[str, ModelPrice]) -> float:
    if "cost_usd" in details:
        return _number(details["cost_usd"])
    usage = details.get("usage") or {}
    model = details.get("model") or ""
    price = prices.get(model) or prices.get("*")
    if price is None:
        return 0.0
    return price.cost(
        int(_number(usage.get("prompt_tokens"))), int(_number(usage.get("completion_tokens")))
    )


def summarize_usage(
    workflow_id: str, messages: list[StoredMessage], prices: dict[str, ModelPrice]
) -> RunUsage:
    """The run's usage and item counts from its stored messages (pure)."""
    turns: dict[tuple[str | None, str], tuple[str | None, dict[str, Any]]] = {}
    items: dict[str, ItemCounts] = {}
    for stored in messages:
        raw = stored.raw
        if b'"usage"' not in raw and b'"t":13' not in raw:
            continue  # most messages: no JSON parse
        message = orjson.loads(raw)
        details = message.get("d")
        if not isinstance(details, dict):
            continue
        kind = message.get("t")
        if kind == AgentMessageType.BATCH_PROGRESS:
            node = details.get("node_id") or details.get("node")
            if isinstance(node, str):
                items[node] = ItemCounts(
                    done=int(_number(details.get("done"))),
                    failed=int(_number(details.get("failed"))),
                    total=int(_number(details.get("total"))),
                )
        elif kind in TURN_TYPES and isinstance(details.get("usage"), dict):
            workstream = message.get("w")
            key = message.get("i") or f"seq:{stored.seq}"
            turns[(workstream, str(key))] = (workstream, details)
    view = RunUsage(workflow_id=workflow_id, total=Usage(), items=items)
    for workstream, details in turns.values():
        usage = details["usage"]
        figures = (
            int(_number(usage.get("prompt_tokens"))),
            int(_number(usage.get("completion_tokens"))),
            _turn_cost(details, prices),
            _number(details.get("llm_ms")),
        )
        view.total.add(*figures)
        if workstream:
            view.workstreams.setdefault(workstream, Usage()).add(*figures)
        elif isinstance(details.get("node_id"), str):
            view.nodes.setdefault(details["node_id"], Usage()).add(*figures)
    return view


async def run_usage(
    workflow_id: str,
    *,
    bus: MessageBus,
    archive: RunArchive | None,
    prices: dict[str, ModelPrice],
) -> RunUsage:
    """The run's usage from its messages in Redis and the archive."""
    messages = await stored_messages(workflow_id, bus=bus, archive=archive)
    return summarize_usage(workflow_id, messages, prices)
