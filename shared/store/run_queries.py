"""Which runs ``GET /runs`` lists: the filter of the run list (docs/api/index.md).

``RunFilter`` holds what a caller may narrow the list by and ``run_filter_query``
turns it into a MongoDB query on the ``runs`` collection. Only operators the
nx-27017 wire server answers as MongoDB does are used (equality, ``$regex`` with
``$options``, ``$gte``/``$lt`` on dates written at insert: see
``spindle.shared.store.archive``); an id search is a literal substring (the
caller's text is escaped, never a pattern of theirs).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from spindle.shared.store.run_document import as_utc, storable

#: Longest id search accepted (workflow ids are far shorter).
MAX_ID_SEARCH = 200


class RunFilter(BaseModel):
    """What the run list is narrowed by; None: not narrowed by it.

    Attributes:
        tenant_id: the tenant's runs only.
        status: one run status (``running``, ``completed``, ...).
        graph_name: runs of this graph.
        id_contains: runs whose workflow id contains this text (any case).
        conversation_id: runs of this conversation (``POST /runs`` ``conversation_id``).
        forked_from: forks of this run (their ``forked_from.workflow_id``).
        created_after: runs created at or after this time.
        created_before: runs created before this time.
    """

    model_config = ConfigDict(frozen=True)

    tenant_id: str | None = None
    status: str | None = None
    graph_name: str | None = None
    id_contains: str | None = Field(None, min_length=1, max_length=MAX_ID_SEARCH)
    conversation_id: str | None = None
    forked_from: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


def run_filter_query(where: RunFilter) -> dict[str, Any]:
    """The ``runs`` query of a filter (every given field must hold)."""
    query: dict[str, Any] = {}
    if where.tenant_id is not None:
        query["tenant_id"] = where.tenant_id
    if where.status is not None:
        query["status"] = storable(where.status)
    if where.graph_name is not None:
        query["graph_name"] = where.graph_name
    if where.id_contains is not None:
        query["_id"] = {"$regex": re.escape(where.id_contains), "$options": "i"}
    if where.conversation_id is not None:
        query["conversation_id"] = where.conversation_id
    if where.forked_from is not None:
        query["forked_from.workflow_id"] = where.forked_from
    created: dict[str, Any] = {}
    if where.created_after is not None:
        created["$gte"] = as_utc(where.created_after)
    if where.created_before is not None:
        created["$lt"] = as_utc(where.created_before)
    if created:
        query["created_at"] = created
    return query
