"""What the worker's workflows and activities share: neither imports the other.

The workflows decide what runs and the activities do the I/O; both read this
package, which imports neither (``lint-imports`` holds it; see pyproject.toml).
Everything here is pure (no I/O, no clock), so workflow code may use it:

- ``activity_names``, ``activity_models``: the name of every activity and the typed
  models in and out of it (re-exported here: ``from spindle.worker.contracts import RunRef``);
- ``policies``: retry policies, timeouts, task queues and priorities of activities;
- ``param_resolution``: a node's parameters, rendered and validated;
- ``prompt_answers``: a human's answer to a prompt, validated against its schema;
- ``envelope``: the NodeMessage envelope (seed 000) that travels between nodes;
- ``workstream_tools``: the workstream tools as the model sees them.
"""

from spindle.shared.contracts.forks import CallReplay
from spindle.worker.contracts.activity_models import (
    ArtifactMerge,
    ChatMessage,
    Empty,
    InputAcceptance,
    InputExpiry,
    InputRequest,
    ItemBatch,
    ItemBatchDone,
    ItemCollection,
    ItemPlan,
    LlmTurnInput,
    LlmTurnResult,
    MergedArtifacts,
    NodeExecution,
    NodeOutcome,
    RunFinish,
    RunNotice,
    RunRef,
    RunStart,
    RunStartAdmission,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
    WorkstreamFinish,
    WorkstreamFinished,
)
from spindle.worker.contracts.activity_names import (
    ACCEPT_INPUT,
    COLLECT_ITEMS,
    EXECUTE_NODE,
    EXPIRE_INPUT,
    FINISH_RUN,
    FINISH_WORKSTREAM,
    LLM_TURN,
    MERGE_CHILD_ARTIFACTS,
    PLAN_ITEMS,
    POST_MESSAGE,
    RECORD_RUN_START,
    REQUEST_INPUT,
    RUN_ITEM_BATCH,
    TOOL_CALL,
)

__all__ = [
    "ACCEPT_INPUT",
    "COLLECT_ITEMS",
    "EXECUTE_NODE",
    "EXPIRE_INPUT",
    "FINISH_RUN",
    "FINISH_WORKSTREAM",
    "LLM_TURN",
    "MERGE_CHILD_ARTIFACTS",
    "PLAN_ITEMS",
    "POST_MESSAGE",
    "RECORD_RUN_START",
    "REQUEST_INPUT",
    "RUN_ITEM_BATCH",
    "TOOL_CALL",
    "ArtifactMerge",
    "CallReplay",
    "ChatMessage",
    "Empty",
    "InputAcceptance",
    "InputExpiry",
    "InputRequest",
    "ItemBatch",
    "ItemBatchDone",
    "ItemCollection",
    "ItemPlan",
    "LlmTurnInput",
    "LlmTurnResult",
    "MergedArtifacts",
    "NodeExecution",
    "NodeOutcome",
    "RunFinish",
    "RunNotice",
    "RunRef",
    "RunStart",
    "RunStartAdmission",
    "ToolCall",
    "ToolCallInput",
    "ToolCallResult",
    "WorkstreamFinish",
    "WorkstreamFinished",
]
