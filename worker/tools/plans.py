"""Posting the PLAN (type 2) message of ``update_plan`` (seed 002; docs/graphs/tools.md#plans).

The tool itself only knows its ``ToolContext``; whoever runs it (an agent's
``tool_call`` activity, a ``tool`` node) gives the context a ``post_plan`` made
here, bound to the run's poster and the calling node.
"""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.messages import AgentMessageType, PlanDetails, PlanTask
from spindle.worker.posting.poster import MessagePoster
from spindle.worker.tools.context import PlanPoster


def plan_text(tasks: list[PlanTask], explanation: str | None) -> str:
    """PLAN's text: how far the plan is, and what changed (the tasks are in ``d``)."""
    done = sum(1 for task in tasks if task.status == "done")
    text = f"Plan: {done} of {len(tasks)} tasks done"
    return f"{text}. {explanation}" if explanation else text


def plan_poster(poster: MessagePoster, node_id: str, **extra: Any) -> PlanPoster:
    """A ``post_plan`` that posts a PLAN for ``node_id`` (``extra`` joins its details)."""

    async def post(tasks: list[dict[str, str]], explanation: str | None) -> None:
        details = PlanDetails(
            node_id=node_id,
            tasks=[PlanTask.model_validate(task) for task in tasks],
            explanation=explanation,
        )
        await poster.post(
            AgentMessageType.PLAN,
            plan_text(details.tasks, explanation),
            details={**details.model_dump(exclude_none=True), **extra},
        )

    return post
