"""``GET /runs/{id}/usage``'s sums (``gateway.services.run_usage``): LLM turns per
node and per workstream from the THOUGHT/ANSWER details, a retried turn counted
once, cost priced with the model prices unless the message carries it, and the
maps' latest item counts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from spindle.gateway.services.run_usage import summarize_usage
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.platform.settings_sections.llm import ModelPrice

pytestmark = pytest.mark.unit


def stored(seq: int, message: dict[str, Any]) -> StoredMessage:
    return StoredMessage(seq=seq, ts=1_700_000_000_000 + seq, raw=orjson.dumps(message))


def turn(kind: int, node: str, prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    details = {
        "node_id": node,
        "model": extra.pop("model", "gpt-x"),
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        "llm_ms": 100.0,
    }
    return {"t": kind, "m": "…", "d": {**details, **extra.pop("d", {})}, **extra}


def test_turns_add_up_per_node_and_workstream_and_items_are_the_latest() -> None:
    prices = {"gpt-x": ModelPrice(input_per_1k=1.0, output_per_1k=2.0)}
    messages = [
        stored(1, turn(1, "lead", 1000, 500, i="lead.1.t1")),
        # The same turn again (a retried attempt's message): counted once.
        stored(2, turn(1, "lead", 1000, 500, i="lead.1.t1")),
        stored(3, turn(7, "lead", 200, 100, i="lead.1.t2")),
        stored(4, turn(7, "ws-1", 10, 5, i="g0.m1.t1", w="ws-1", d={"cost_usd": 0.5})),
        stored(5, {"t": 13, "m": "1/4", "d": {"node_id": "moods", "done": 1, "total": 4}}),
        stored(
            6, {"t": 13, "m": "4/4", "d": {"node_id": "moods", "done": 3, "failed": 1, "total": 4}}
        ),
        stored(7, {"t": 3, "m": "Using tool x", "d": {"node_id": "lead"}}),
        stored(8, {"t": 7, "m": "no usage reported", "d": {"node_id": "other"}}),
    ]
    view = summarize_usage("run-1", messages, prices)

    lead = view.nodes["lead"]
    assert (lead.llm_turns, lead.prompt_tokens, lead.completion_tokens) == (2, 1200, 600)
    assert lead.tokens == 1800 and lead.llm_ms == 200.0
    assert lead.cost_usd == pytest.approx(1.2 + 1.2)  # (1200 * 1 + 600 * 2) / 1000
    assert set(view.nodes) == {"lead"}
    ws = view.workstreams["ws-1"]
    assert (ws.tokens, ws.cost_usd) == (15, 0.5)  # the message's own cost wins
    assert view.total.tokens == 1815 and view.total.llm_turns == 3
    assert view.total.cost_usd == pytest.approx(2.9)
    assert view.items["moods"].model_dump() == {"done": 3, "failed": 1, "total": 4}


def test_an_unpriced_model_costs_nothing_and_a_star_price_prices_any() -> None:
    messages = [stored(1, turn(7, "a", 100, 100, i="a.1.t1", model="other"))]
    assert summarize_usage("r", messages, {}).total.cost_usd == 0.0
    star = {"*": ModelPrice(input_per_1k=10.0, output_per_1k=0.0)}
    assert summarize_usage("r", messages, star).total.cost_usd == pytest.approx(1.0)
