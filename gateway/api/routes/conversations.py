"""Conversations: the runs of one conversation, with their busy-run outcomes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from spindle.gateway.api.deps import TemporalDep, TenantDep
from spindle.gateway.models import ConversationRunList
from spindle.gateway.runs.conversations import conversation_runs
from spindle.shared.contracts.conversations import CONVERSATION_ID_PATTERN

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
