"""Signals to a run (seed 002's ``POST …/signal/{name}``).

``UserInput`` is delivered as the Temporal Update of the same name, so the
caller learns at once whether the answer was accepted: an invalid HITL answer
is rejected by the workflow's update validator (422 naming the field; the run
keeps waiting and nothing is written to its history), an answer with no
prompt pending is a 409 (an expired or already answered prompt: its own
problem title), and a caller the prompt is not assigned to gets a 403.
"""

from __future__ import annotations

import logging
import uuid
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body

from spindle.gateway.api.deps import (
    ArchiveDep,
    IdentityDep,
    LimitsDep,
    ReadableRunDep,
    SettingsDep,
    TemporalDep,
)
from spindle.gateway.runs.access import RunOwner
from spindle.gateway.runs.answers import (
    answering_as,
    authorize_answer,
    keep_refusal,
    mark_answered,
    prompt_for,
)
from spindle.gateway.runs.updates import execute_run_update
from spindle.shared.contracts.errors import (
    InputInvalid,
    NotFound,
    NotWaiting,
    SpindleError,
    from_application_error,
)
from spindle.shared.contracts.identity import Identity
from spindle.shared.contracts.runs import USER_INPUT_UPDATE, SignalAck, UserInput
from spindle.shared.platform.settings import Settings
from spindle.shared.store.prompts import PromptStore

log = logging.getLogger(__name__)

router = APIRouter(tags=["signals"])

SUPPORTED_SIGNALS = (USER_INPUT_UPDATE,)

SIGNAL_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    403: {
        "description": "the caller may not answer: not an assignee (or assigned role) of an "
        "assigned prompt, nor the run's owner for another; run-control roles always may"
    },
    404: {"description": "unknown run or signal name (problem+json)"},
    409: {
        "description": "the prompt expired (title 'Prompt expired') or was answered already "
        "(title 'Prompt already answered'), the run is not waiting for input, or has "
        "finished; the run is unchanged (problem+json)"
    },
    422: {"description": "the answer does not satisfy the prompt's schema (problem+json)"},
    429: {"description": "the tenant sends signals too fast; retry after Retry-After"},
    503: {"description": "Temporal unavailable or no worker answered in time (problem+json)"},
}


async def deliver_signal(
    workflow_id: str,
    name: str,
    body: UserInput | None,
    *,
    identity: Identity,
    temporal: TemporalDep,
    archive: ArchiveDep,
    max_answer_bytes: int,
    settings: Settings,
    owner: RunOwner | None = None,
) -> SignalAck:
    """Deliver ``body`` as the ``name`` update (only ``UserInput``), for REST and A2A.

    The caller must be allowed to answer the prompt (``spindle.gateway.runs.answers``):
    with ``owner`` given, a caller who is neither an assignee of an assigned prompt
    nor the owner (or a run-control role) of an unassigned one is refused here;
    the workflow checks assignees again. Every refused attempt is kept.

    Raises:
        SpindleError: an unknown signal (404), a caller who may not answer (403),
            an answer over ``max_answer_bytes`` or refused by the prompt (422; the
            run keeps waiting), a late or duplicate answer (409), and what
            ``execute_run_update`` raises.
    """
    if name not in SUPPORTED_SIGNALS:
        raise NotFound(
            f"unknown signal '{name}'; supported: {', '.join(SUPPORTED_SIGNALS)}",
            errors=[{"field": "name", "rule": "enum", "supported": list(SUPPORTED_SIGNALS)}],
        )
    # The answer carries who gave it, as authenticated: never what the body claims.
    user_input = answering_as(body or UserInput(), identity, settings)
    # A retried answer reuses its client_message_id, so its update id: no double answer.
    update_id = (
        f"input-{user_input.client_message_id}"
        if user_input.client_message_id
        else f"input-{uuid.uuid4().hex}"
    )
    prompts = PromptStore(archive.database)
    prompt = await prompt_for(prompts, workflow_id, user_input.node_id)
    try:
        authorize_answer(prompt, identity, settings, owner, workflow_id)
        _check_answer_size(user_input, max_answer_bytes)
        ack = await execute_run_update(
            temporal,
            archive,
            workflow_id=workflow_id,
            name=USER_INPUT_UPDATE,
            argument=user_input,
            result_type=SignalAck,
            update_id=update_id,
            refused=lambda cause: _update_failure(workflow_id, cause),
        )
    except SpindleError as refused:
        await keep_refusal(
            prompts,
            update_id=update_id,
            workflow_id=workflow_id,
            identity=identity,
            user_input=user_input,
            prompt=prompt,
            error=refused,
        )
        raise
    if user_input.node_id is not None:
        # Out of every inbox now, not only once the worker has accepted it. (Without
        # a node id the run took its oldest prompt, which the store may not know yet.)
        await mark_answered(prompts, prompt)
    return ack


@router.post(
    "/runs/{workflow_id}/{run_id}/signal/{name}",
    response_model=SignalAck,
    summary="Send a signal (UserInput: a message or a HITL answer)",
    responses=SIGNAL_RESPONSES,
)
async def signal_run(
    workflow_id: str,
    run_id: str,
    name: str,
    *,
    run: ReadableRunDep,
    identity: IdentityDep,
    limits: LimitsDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
    settings: SettingsDep,
    body: Annotated[UserInput | None, Body()] = None,
) -> SignalAck:
    await limits.check_signal(identity.tenant_id)
    return await deliver_signal(
        workflow_id,
        name,
        body,
        identity=identity,
        temporal=temporal,
        archive=archive,
        max_answer_bytes=settings.max_answer_bytes,
        settings=settings,
        owner=run,
    )


@router.post(
    "/runs/{workflow_id}/signal/{name}",
    response_model=SignalAck,
    summary="Send a signal to the run's current execution",
    responses=SIGNAL_RESPONSES,
)
async def signal_workflow(
    workflow_id: str,
    name: str,
    *,
    run: ReadableRunDep,
    identity: IdentityDep,
    limits: LimitsDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
    settings: SettingsDep,
    body: Annotated[UserInput | None, Body()] = None,
) -> SignalAck:
    await limits.check_signal(identity.tenant_id)
    return await deliver_signal(
        workflow_id,
        name,
        body,
        identity=identity,
        temporal=temporal,
        archive=archive,
        max_answer_bytes=settings.max_answer_bytes,
        settings=settings,
        owner=run,
    )


def _check_answer_size(user_input: UserInput, limit: int) -> None:
    """Refuse an answer whose data and message pass ``limit`` bytes (as JSON).

    Checked here, before the update: the run's history would keep every byte.
    """
    size = len(orjson.dumps(user_input.data)) if user_input.data is not None else 0
    size += len((user_input.message or "").encode())
    if size > limit:
        raise InputInvalid(
            f"the answer is {size} bytes; the limit is {limit} bytes (SPINDLE_MAX_ANSWER_BYTES)",
            errors=[
                {
                    "field": "data" if user_input.data is not None else "message",
                    "rule": "max_bytes",
                    "message": f"at most {limit} bytes of data and message together",
                }
            ],
        )


def _update_failure(workflow_id: str, cause: BaseException) -> SpindleError:
    error = from_application_error(cause)
    if isinstance(error, InputInvalid | NotWaiting):
        return error
    log.error("UserInput update of %s failed: %r", workflow_id, cause)
    return SpindleError(f"the run could not take the input: {cause}")
