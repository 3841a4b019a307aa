"""``GET /runs/{workflow_id}/bundle``: everything about one run, in one JSON document.

For support and debugging: attach the bundle to a bug report and the run can be
read (and its Temporal history replayed) without access to the servers. The
document has these parts:

* ``run``: the run as ``GET /runs/{workflow_id}`` describes it;
* ``messages``: its stored messages, the compact JSON ``/updates`` serves;
* ``node_reports``: the archived node reports, with their inputs and outputs;
* ``history``: the run's Temporal event histories, one per generation (a run
  that continued as new has several runs under one workflow id), oldest first:
  a list of ``{"run_id": ..., "events": [...]}``, each one Temporal's history
  JSON (``temporal history``'s format, what ``Replayer`` reads) with its run id;
  an empty list once Temporal no longer keeps the run. (Until the volume work
  it was one history object, the latest run's: docs/graphs/long-runs.md.)
  The identities of the workers and clients that acted on the run and the
  workers' sticky queues (``pid@hostname``) are blanked: a bundle leaves the
  servers, their names stay behind.

* ``trace``: the run's NodeMessages (the ``run_trace`` collection), in order,
  each with the ``traceId`` / ``spanId`` of the span that recorded it;
* ``answer_attempts``: every attempt to answer one of its prompts — accepted,
  refused by the schema, late, duplicate, forbidden — with user, time and
  outcome (``spindle.shared.store.prompts``);
* ``trace_ids``: the run's OpenTelemetry trace id (``run``) and, for each
  archived message, the trace and span that posted it (``messages``: ``seq``,
  ``traceId``, ``spanId``); empty when tracing was off.

The history is returned whole, however long: a replay needs every event. A
run of thousands of node executions makes a bundle of several megabytes.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import APIRouter
from fastapi.responses import Response
from pydantic import BaseModel, Field

from spindle.gateway.api.deps import (
    ArchiveDep,
    BusDep,
    CallerDep,
    ReadableRunDep,
    SettingsDep,
)
from spindle.gateway.models import RunDetail
from spindle.gateway.services import run_records
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_views import RunLookup, describe_run
from spindle.gateway.streams.history import stored_messages
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.prompts import PromptStore
from spindle.shared.store.run_trace import message_trace_ids, run_trace

log = logging.getLogger(__name__)

router = APIRouter(tags=["runs"])


class RunBundle(BaseModel):
    """The shape of a bundle (documentation: the route writes the bytes itself)."""

    run: RunDetail
    messages: list[dict[str, Any]] = Field(description="stored compact messages, in seq order")
    node_reports: list[dict[str, Any]] = Field(
        description="archived node reports with input and output"
    )
    history: list[dict[str, Any]] = Field(
        description="one Temporal event history JSON per generation (continue-as-new), "
        "oldest first, each with its run_id; empty when Temporal no longer has the run"
    )
    trace: list[dict[str, Any]] = Field(
        description="the run's NodeMessages (seed 000), in order, with traceId / spanId"
    )
    trace_ids: dict[str, Any] = Field(
        description="run: the run's trace id; messages: [{seq, traceId, spanId}] per message"
    )
    answer_attempts: list[dict[str, Any]] = Field(
        description="every answer attempt on its prompts: user_id, at, outcome, node_id, detail"
    )


@router.get(
    "/runs/{workflow_id}/bundle",
    summary="A run's description, messages, node reports and Temporal history in one JSON",
    responses={
        200: {"model": RunBundle, "description": "the run bundle"},
        401: {"description": "missing or invalid credentials (problem+json)"},
        404: {"description": "unknown run (problem+json)"},
        503: {"description": "Temporal, Redis or MongoDB unavailable; retry (problem+json)"},
    },
)
async def get_run_bundle(
    workflow_id: str,
    *,
    run: ReadableRunDep,
    bus: BusDep,
    archive: ArchiveDep,
    settings: SettingsDep,
    caller: CallerDep,
) -> Response:
    detail = await describe_run(caller, RunLookup(workflow_id=workflow_id))
    messages = await stored_messages(
        workflow_id, bus=bus, archive=caller.state.archive_if_enabled()
    )
    reports = await _node_reports(archive, workflow_id) if settings.archive_enabled else []
    traced = await _trace(archive, workflow_id) if settings.archive_enabled else ([], {})
    attempts = await _answer_attempts(archive, workflow_id)
    history = await _history(caller, workflow_id)
    # Stored messages already are compact JSON: splice their bytes in unparsed.
    body = b"".join(
        (
            b'{"run":',
            detail.model_dump_json(by_alias=True).encode(),
            b',"messages":[',
            b",".join(m.raw for m in messages),
            b'],"node_reports":',
            orjson.dumps(reports, default=str),
            b',"history":',
            orjson.dumps(history),
            b',"trace":',
            orjson.dumps(traced[0], default=str),
            b',"trace_ids":',
            orjson.dumps(traced[1]),
            b',"answer_attempts":',
            orjson.dumps(attempts, default=str),
            b"}",
        )
    )
    return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})


async def _node_reports(archive: RunArchive, workflow_id: str) -> list[dict[str, Any]]:
    try:
        return await archive.node_reports(workflow_id)
    except Exception as exc:
        log.warning("archive node reports of %s failed: %s", workflow_id, exc)
        return []


async def _answer_attempts(archive: RunArchive, workflow_id: str) -> list[dict[str, Any]]:
    try:
        return await PromptStore(archive.database).attempts_of(workflow_id)
    except Exception as exc:
        log.warning("answer attempts of %s unavailable: %s", workflow_id, exc)
        return []


async def _trace(
    archive: RunArchive, workflow_id: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        record = await archive.get_run(workflow_id)
        messages = await run_trace(archive, workflow_id)
        posted = await message_trace_ids(archive, workflow_id)
    except Exception as exc:
        log.warning("archive trace of %s failed: %s", workflow_id, exc)
        return [], {}
    run_trace_id = record.trace_id if record is not None else None
    return messages, {"run": run_trace_id, "messages": posted}


async def _history(caller: Caller, workflow_id: str) -> list[dict[str, Any]]:
    """Every generation's history JSON, oldest first, each with its run id."""
    return [
        {"run_id": history.run_id, **_without_identities(history.to_json_dict())}
        for history in await run_records.histories(caller, workflow_id)
    ]


def _without_identities(node: Any) -> Any:
    """``node`` with the names of workers and clients emptied (replay does not read them):
    every ``…identity`` string and the names of sticky task queues (``pid@host-…``)."""
    if isinstance(node, dict):
        sticky = node.get("kind") == "TASK_QUEUE_KIND_STICKY"
        return {
            key: ""
            if isinstance(value, str)
            and (key.lower().endswith("identity") or (sticky and key == "name"))
            else _without_identities(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_without_identities(item) for item in node]
    return node
