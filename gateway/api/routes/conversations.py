"""Conversations: the runs of one conversation, with their busy-run outcomes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from spindle.gateway.api.deps import CallerDep, ReadableRunDep, TemporalDep, TenantDep
from spindle.gateway.models import ConversationRunList
from spindle.gateway.runs.conversations import conversation_runs
from spindle.gateway.services import run_conversation
from spindle.shared.contracts.conversations import CONVERSATION_ID_PATTERN
from spindle.shared.contracts.memory import ConversationView, ThreadView

router = APIRouter(tags=["conversations"])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    404: {"description": "unknown conversation, or another tenant's (problem+json)"},
    422: {"description": "a malformed conversation id (problem+json)"},
    503: {"description": "Temporal or the worker unavailable; retry (problem+json)"},
}


@router.get(
    "/conversations/{conversation_id}/runs",
    response_model=ConversationRunList,
    summary="The runs of a conversation, oldest first, with the run going and its history",
    responses=PROBLEMS,
)
async def list_conversation_runs(
    conversation_id: Annotated[str, Path(pattern=CONVERSATION_ID_PATTERN)],
    *,
    tenant: TenantDep,
    temporal: TemporalDep,
) -> ConversationRunList:
    runs = await conversation_runs(temporal, tenant_id=tenant, conversation_id=conversation_id)
    return ConversationRunList.model_validate(runs.model_dump())


@router.get(
    "/conversations/{conversation_id}",
    response_model=ThreadView,
    summary="A conversation: its runs and its agents' shared memory (the thread)",
    responses=PROBLEMS,
)
async def get_conversation(
    conversation_id: Annotated[str, Path(pattern=CONVERSATION_ID_PATTERN)],
    *,
    caller: CallerDep,
) -> ThreadView:
    return await run_conversation.thread(caller, conversation_id)


@router.get(
    "/runs/{workflow_id}/conversation",
    response_model=ConversationView,
    summary="What an agent of the run is given by its next (or last) LLM turn, paged",
    responses={
        401: {"description": "missing or invalid credentials (problem+json)"},
        404: {"description": "unknown run, another tenant's, or no such agent (problem+json)"},
        422: {"description": "a malformed query (problem+json)"},
    },
)
async def get_run_conversation(
    workflow_id: str,
    *,
    run: ReadableRunDep,
    caller: CallerDep,
    node: Annotated[
        str | None,
        Query(max_length=200, description="the agent node (a workstream's: its launch id)"),
    ] = None,
    workstream: Annotated[str, Query(max_length=200, description="main or a launch id")] = "main",
    cursor: Annotated[
        int, Query(ge=0, le=10_000_000, description="next_cursor of the previous page")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=500, description="messages per page")] = 100,
) -> ConversationView:
    return await run_conversation.run_conversation(
        caller, workflow_id, node=node, workstream=workstream, cursor=cursor, limit=limit
    )
