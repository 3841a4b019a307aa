"""Several prompts pending at once (parallel branches), answered by node id or oldest-first."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from spindle.shared.contracts.runs import RunStatus, UserInput
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.workflow.runs import GraphRunner, M, eventually, types_of

pytestmark = pytest.mark.workflow

TWO_PROMPTS = parse_graph(
    {
        "name": "two-prompts",
        "entry": "start",
        "nodes": [
            {
                "id": "start",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "x"}},
            },
            {
                "id": "ask_name",
                "type": "prompt",
                "params": {"prompt": "Name for {{ input.project }}?"},
            },
            {
                "id": "ask_size",
                "type": "prompt",
                "params": {
                    "prompt": "How many?",
                    "ui_schema": {
                        "type": "object",
                        "properties": {"n": {"type": "integer", "minimum": 1}},
                        "required": ["n"],
                    },
                },
            },
            {
                "id": "join",
                "type": "output",
                "params": {"select": "{name: ask_name, size: ask_size}"},
            },
        ],
        "edges": [
            {"from": "start", "to": "ask_name"},
            {"from": "start", "to": "ask_size"},
            {"from": "ask_name", "to": "join"},
            {"from": "ask_size", "to": "join"},
        ],
    }
)
validate_structure(TWO_PROMPTS)


async def test_parallel_prompts_are_answered_by_node_id_then_oldest_first(
    runner: GraphRunner,
) -> None:
    handle = await runner.start(TWO_PROMPTS, {"project": "spindle"})

    async def both_asked() -> list[dict] | None:
        messages = await runner.messages(handle.id)
        return messages if types_of(messages).count(M.REQUEST_INPUT) == 2 else None

    await eventually(both_asked, what="two REQUEST_INPUT messages")
    described = await runner.describe(handle)
    assert described.status is RunStatus.PAUSED
    assert sorted(described.current_nodes) == ["ask_name", "ask_size"]
    assert described.pending_input is not None
    assert described.pending_input.node_id == "ask_name"  # the oldest
    assert described.pending_input.prompt == "Name for spindle?"  # template rendered

    # A plain message cannot answer ask_size (its one required field is an integer).
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await runner.answer(handle, UserInput(message="seven", node_id="ask_size"))
    assert isinstance(refused.value.cause, ApplicationError)
    assert refused.value.cause.details[0]["errors"] == [
        {"field": "n", "rule": "required", "message": "'n' is a required property"}
    ]

    await runner.answer(handle, UserInput(data={"n": 7}, node_id="ask_size"))
    after_first = await runner.describe(handle)
    assert after_first.pending_input is not None
    assert after_first.pending_input.node_id == "ask_name"

    await runner.answer(handle, UserInput(message="Loom"))  # no node id: the oldest
    result = await handle.result()
    assert result.output == {"name": {"ask_name_response": "Loom"}, "size": {"n": 7}}

    # A finished run takes no more answers (the server refuses the update).
    with pytest.raises((WorkflowUpdateFailedError, RPCError)):
        await runner.answer(handle, UserInput(message="too late"))
    questions = [m for m in await runner.messages(handle.id) if m["t"] == M.QUESTION]
    assert [q["d"]["node_id"] for q in questions] == ["ask_size", "ask_name"]
