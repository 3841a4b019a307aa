"""``GET /inbox``: the open human requests (prompts) the caller may answer.

Across every run of the caller's tenant, oldest first: prompts that have asked,
are neither answered, expired nor closed with their run, and that the caller may
answer (docs/operations/threat-model.md: assignees, assigned roles, run-control
roles; an unassigned prompt, its run's owner). Read from the ``prompts``
collection the worker keeps (``spindle.shared.store.prompts``), so an answered or
expired prompt leaves every inbox once the worker has recorded it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from spindle.gateway.api.deps import ArchiveDep, IdentityDep, SettingsDep
from spindle.gateway.runs.answers import may_control
from spindle.shared.store.prompts import PromptRecord, PromptStore

router = APIRouter(tags=["runs"])


class InboxItem(BaseModel):
    """One open prompt the caller may answer."""

    workflow_id: str = Field(description="the run; answer with POST /runs/{workflow_id}/signal/…")
    node_id: str = Field(description="the prompt node: the answer's node_id")
    graph_name: str | None = None
    prompt: str
    title: str | None = None
    ui_schema: dict[str, Any] = Field(description="JSON Schema of the answer")
    requested_at: str
    expires_at: str | None = Field(None, description="no answer is taken from then on")
    assignees: list[str] = Field(default_factory=list, description="user ids who may answer")
    roles: list[str] = Field(default_factory=list, description="roles whose users may answer")
    cursor: str = Field(description="pass as ?after= for the entries after this one")


class Inbox(BaseModel):
    """A page of the caller's inbox."""

    items: list[InboxItem]
    next: str | None = Field(None, description="?after= for the next page; null on the last")


def _item(record: PromptRecord) -> InboxItem:
    return InboxItem(
        workflow_id=record.workflow_id,
        node_id=record.node_id,
        graph_name=record.graph_name,
        prompt=record.prompt,
        title=record.title,
        ui_schema=record.ui_schema,
        requested_at=record.requested_at,
        expires_at=record.expires_at,
        assignees=record.assignees,
        roles=record.roles,
        cursor=record.order,
    )


@router.get(
    "/inbox",
    response_model=Inbox,
    summary="Open prompts the caller may answer, across the tenant's runs, oldest first",
    responses={
        401: {"description": "missing or invalid credentials (problem+json)"},
        422: {"description": "bad limit or after (problem+json)"},
        503: {"description": "MongoDB unavailable; retry (problem+json)"},
    },
)
async def get_inbox(
    *,
    identity: IdentityDep,
    archive: ArchiveDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=200, description="entries per page")] = 50,
    after: Annotated[
        str | None,
        Query(min_length=1, max_length=600, description="a previous page's next"),
    ] = None,
) -> Inbox:
    records = await PromptStore(archive.database).inbox(
        identity.tenant_id,
        user_id=identity.user_id,
        roles=identity.roles,
        run_control=may_control(identity, settings),
        limit=limit + 1,  # one more: whether a next page exists
        after=after,
    )
    page = records[:limit]
    more = len(records) > limit
    return Inbox(items=[_item(r) for r in page], next=page[-1].order if more and page else None)
