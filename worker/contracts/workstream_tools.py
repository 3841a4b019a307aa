"""The workstream tools as the model sees them: ``launch_workstream``, ``steer_workstream``,
``message_workstream``, ``terminate_workstream``, ``wait_workstreams``.

The ``llm_turn`` activity shows the model these specs for the names an agent node
lists; the workflow answers the calls (``spindle.worker.workflows.workstreams.parent_tools``).
"""

from __future__ import annotations

from spindle.shared.contracts.workstreams import (
    DEADLINE_DEFAULT_SECONDS,
    DEADLINE_MAX_SECONDS,
    DEADLINE_MIN_SECONDS,
    LAUNCH_WORKSTREAM_TOOL,
    MESSAGE_WORKSTREAM_TOOL,
    STEER_WORKSTREAM_TOOL,
    TERMINATE_WORKSTREAM_TOOL,
    WAIT_MAX_SECONDS,
    WAIT_WORKSTREAMS_TOOL,
    SteerCommand,
)
from spindle.worker.llm.base import ToolSpec

_LAUNCH_ID = {"type": "string", "description": "the launch id launch_workstream returned (ws-<n>)"}

WORKSTREAM_TOOL_SPECS: dict[str, ToolSpec] = {
    LAUNCH_WORKSTREAM_TOOL: ToolSpec(
        name=LAUNCH_WORKSTREAM_TOOL,
        description=(
            "Launch a sub-agent (workstream) that works on a task in the background. "
            "Returns its launch_id at once; when it ends, its result (summary and "
            "artifact names) is given to you as a system message starting "
            "'[workstream result]' before your next step. If you answer while it still "
            "runs, you wait for it and then continue (unless you launched it with "
            "wait: false)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "what the sub-agent must do"},
                "deadline_seconds": {
                    "type": "integer",
                    "minimum": DEADLINE_MIN_SECONDS,
                    "maximum": DEADLINE_MAX_SECONDS,
                    "default": DEADLINE_DEFAULT_SECONDS,
                    "description": "time budget in seconds",
                },
                "interactive": {
                    "type": "boolean",
                    "default": False,
                    "description": "after the task, wait for message_workstream; "
                    "ends only with terminate_workstream",
                },
                "label": {"type": "string", "description": "a short name to show"},
                "wait": {
                    "type": "boolean",
                    "default": True,
                    "description": "if you answer before it ends, wait for its result and "
                    "continue; false: do not wait for it",
                },
                "budget": {
                    "type": "object",
                    "description": "the sub-agent's own spend caps, reserved out of this "
                    "run's remaining budget (refused if they do not fit)",
                    "properties": {
                        "max_llm_tokens": {"type": "integer", "minimum": 1},
                        "max_tool_calls": {"type": "integer", "minimum": 1},
                        "max_cost_usd": {"type": "number", "exclusiveMinimum": 0},
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["task"],
        },
    ),
    STEER_WORKSTREAM_TOOL: ToolSpec(
        name=STEER_WORKSTREAM_TOOL,
        description="Steer a running workstream without stopping it.",
        parameters={
            "type": "object",
            "properties": {
                "launch_id": _LAUNCH_ID,
                "command": {"type": "string", "enum": [c.value for c in SteerCommand]},
                "text": {
                    "type": "string",
                    "description": "required for add_instruction, set_priority, add_constraint",
                },
            },
            "required": ["launch_id", "command"],
        },
    ),
    MESSAGE_WORKSTREAM_TOOL: ToolSpec(
        name=MESSAGE_WORKSTREAM_TOOL,
        description="Send a follow-up message to a running interactive workstream.",
        parameters={
            "type": "object",
            "properties": {"launch_id": _LAUNCH_ID, "message": {"type": "string"}},
            "required": ["launch_id", "message"],
        },
    ),
    TERMINATE_WORKSTREAM_TOOL: ToolSpec(
        name=TERMINATE_WORKSTREAM_TOOL,
        description="Stop a workstream (an interactive one ends only this way).",
        parameters={
            "type": "object",
            "properties": {"launch_id": _LAUNCH_ID},
            "required": ["launch_id"],
        },
    ),
    WAIT_WORKSTREAMS_TOOL: ToolSpec(
        name=WAIT_WORKSTREAMS_TOOL,
        description=(
            "Wait until workstreams you launched end (default: all your non-interactive "
            "ones) or the timeout passes; returns the results of those that ended."
        ),
        parameters={
            "type": "object",
            "properties": {
                "launch_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "the launch ids to wait for (default: all yours)",
                },
                "timeout_seconds": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": WAIT_MAX_SECONDS,
                    "description": "stop waiting after this many seconds (default: until "
                    "they end; required for an interactive workstream)",
                },
            },
        },
    ),
}
