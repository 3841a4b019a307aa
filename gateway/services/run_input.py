"""Input to a run: a message or a human's answer, delivered as the ``UserInput`` update.

``UserInput`` is delivered as the Temporal Update of the same name, so the
caller learns at once whether the answer was accepted: an invalid HITL answer
is rejected by the workflow's update validator (422 naming the field; the run
keeps waiting and nothing is written to its history), an answer with no
prompt pending is a 409 (an expired or already answered prompt: its own
problem title), and a caller the prompt is not assigned to gets a 403. Every
door (REST ``…/signal/{name}``, A2A, AG-UI resume, MCP elicitation) sends its
input through ``signal_run``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import is_missing_handler
from spindle.gateway.runs.access import RunOwner
from spindle.gateway.runs.answers import (
    answering_as,
    authorize_answer,
    keep_refusal,
    mark_answered,
    prompt_for,
)
from spindle.gateway.runs.updates import execute_run_update
from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.budgets import RAISE_BUDGET_UPDATE, BudgetAck, BudgetRaise
from spindle.shared.contracts.errors import (
    BudgetRefused,
    Conflict,
    InputInvalid,
    NotFound,
    NotWaiting,
    SpindleError,
    UnknownWorkstream,
    from_application_error,
)
from spindle.shared.contracts.runs import (
    COMPLETE_AGENT_UPDATE,
    FILE_UPLOADED_SIGNAL,
    USER_INPUT_UPDATE,
    USER_MESSAGE_UPDATE,
    CompleteAck,
    CompleteAgent,
    FileUploaded,
    SignalAck,
    UserInput,
)
from spindle.shared.contracts.workstreams import (
    MESSAGE_WORKSTREAM_UPDATE,
    MessageWorkstream,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
)
from spindle.shared.store.prompts import PromptStore

log = logging.getLogger(__name__)

SUPPORTED_SIGNALS = (USER_INPUT_UPDATE,)
WORKSTREAM_MESSAGE_MAX_CHARS = 20_000
"""As ``WorkstreamMessageRequest.message`` allows."""


class RunSignal(BaseModel):
    """A signal to a run: its name (only ``UserInput``) and the input it carries."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str = Field(min_length=1)
    name: str = USER_INPUT_UPDATE
    input: UserInput | None = None


async def signal_run(
    caller: Caller, signal: RunSignal, *, owner: RunOwner | None = None
) -> SignalAck:
    """Count the signal against the tenant's limit, then deliver it.

    The caller must be allowed to answer the prompt (``spindle.gateway.runs.answers``):
    with ``owner`` given, a caller who is neither an assignee of an assigned prompt
    nor the owner (or a run-control role) of an unassigned one is refused here;
    the workflow checks assignees again. Every refused attempt is kept.

    Raises:
        RateLimited: over ``rate_limit_signals`` (429, Retry-After).
        SpindleError: an unknown signal (404), a caller who may not answer (403),
            an answer over ``max_answer_bytes`` or refused by the prompt (422; the
            run keeps waiting), a late or duplicate answer (409), and what
            ``execute_run_update`` raises.
    """
    await caller.limits.check_signal(caller.tenant_id)
    return await _deliver(caller, signal, owner)


async def _deliver(caller: Caller, signal: RunSignal, owner: RunOwner | None) -> SignalAck:
    workflow_id, name, identity = signal.workflow_id, signal.name, caller.identity
    state = caller.state
    settings = state.settings
    if name not in SUPPORTED_SIGNALS:
        raise NotFound(
            f"unknown signal '{name}'; supported: {', '.join(SUPPORTED_SIGNALS)}",
            errors=[{"field": "name", "rule": "enum", "supported": list(SUPPORTED_SIGNALS)}],
        )
    # The answer carries who gave it, as authenticated: never what the body claims.
    user_input = answering_as(signal.input or UserInput(), identity, settings)
    # A retried answer reuses its client_message_id, so its update id: no double answer.
    update_id = (
        f"input-{user_input.client_message_id}"
        if user_input.client_message_id
        else f"input-{uuid.uuid4().hex}"
    )
    if user_input.workstream_id is not None and user_input.workstream_id != "main":
        # A message for a workstream: the same path as POST …/workstreams/{id}/messages,
        # with its right (the run's owner or a run-control role).
        authorize_answer(None, identity, settings, owner, workflow_id)
        _check_answer_size(user_input, settings.max_answer_bytes)
        sent = await message_workstream(
            caller, workflow_id, user_input.workstream_id, _workstream_message(user_input)
        )
        return SignalAck(status="accepted", message=f"message {sent.message_id} sent")
    prompts = PromptStore(state.archive.database)
    prompt = await prompt_for(prompts, workflow_id, user_input.node_id)
    try:
        authorize_answer(prompt, identity, settings, owner, workflow_id)
        _check_answer_size(user_input, settings.max_answer_bytes)
        ack = await _send_input(caller, workflow_id, user_input, update_id)
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


async def _send_input(
    caller: Caller, workflow_id: str, user_input: UserInput, update_id: str
) -> SignalAck:
    """A structured answer goes to the prompt (``UserInput``); a message to whichever of
    the prompt that waits or the listening agent applies (``user_message``: the run
    decides). A run started before ``user_message`` existed takes ``UserInput``."""
    state = caller.state
    structured = user_input.data is not None
    name = USER_INPUT_UPDATE if structured else USER_MESSAGE_UPDATE
    try:
        return await execute_run_update(
            state.temporal,
            state.archive,
            workflow_id=workflow_id,
            name=name,
            argument=user_input,
            result_type=SignalAck,
            update_id=update_id,
            refused=lambda cause: _update_failure(workflow_id, cause),
        )
    except _OldRun:
        return await execute_run_update(
            state.temporal,
            state.archive,
            workflow_id=workflow_id,
            name=USER_INPUT_UPDATE,
            argument=user_input,
            result_type=SignalAck,
            update_id=update_id,
            refused=lambda cause: _update_failure(workflow_id, cause),
        )


def _workstream_message(user_input: UserInput) -> WorkstreamMessageRequest:
    """The message for a workstream: text of 1 to 20,000 characters (as the route's body)."""
    text = user_input.message or ""
    if not 1 <= len(text) <= WORKSTREAM_MESSAGE_MAX_CHARS:
        raise InputInvalid(
            f"a message for workstream '{user_input.workstream_id}' needs 1 to "
            f"{WORKSTREAM_MESSAGE_MAX_CHARS} characters of message; it has {len(text)}",
            errors=[{"field": "message", "rule": "length", "max": WORKSTREAM_MESSAGE_MAX_CHARS}],
        )
    return WorkstreamMessageRequest(message=text)


class _OldRun(SpindleError):
    """The run has no ``user_message`` update (started before it existed)."""


async def message_workstream(
    caller: Caller, workflow_id: str, launch_id: str, message: WorkstreamMessageRequest
) -> WorkstreamMessageAck:
    """A follow-up message for an interactive workstream (its parent's update): the one
    path of ``POST …/workstreams/{id}/messages`` and of a ``UserInput`` naming a
    ``workstream_id``.

    Raises:
        SpindleError: what the parent refused (unknown 404, finished or not
            interactive 409), and what ``update_run`` raises.
    """
    return await update_run(
        caller,
        workflow_id,
        name=MESSAGE_WORKSTREAM_UPDATE,
        argument=MessageWorkstream(launch_id=launch_id, message=message),
        result_type=WorkstreamMessageAck,
        update_id=f"message-{uuid.uuid4().hex}",
        refused=lambda cause: _workstream_refusal(workflow_id, launch_id, cause),
    )


def _workstream_refusal(workflow_id: str, launch_id: str, cause: BaseException) -> SpindleError:
    error = from_application_error(cause)
    if isinstance(error, UnknownWorkstream):
        return NotFound(f"workstream '{launch_id}' was not found in run '{workflow_id}'")
    if error is not None:
        return error  # unknown (404), finished or not interactive (409), as the parent says
    if is_missing_handler(cause):
        return Conflict(f"run '{workflow_id}' does not support workstreams")
    log.error("message to %s of %s failed: %r", launch_id, workflow_id, cause)
    return SpindleError(f"the run could not take the message: {cause}")


async def complete_agent(caller: Caller, workflow_id: str) -> CompleteAck:
    """End the run's listening interactive agent (COMPLETE); the graph goes on.

    Raises:
        NotWaiting: no interactive agent listens (409).
    """
    request = CompleteAgent(user_id=caller.identity.user_id)
    return await update_run(
        caller,
        workflow_id,
        name=COMPLETE_AGENT_UPDATE,
        argument=request,
        result_type=CompleteAck,
        update_id=f"complete-{uuid.uuid4().hex}",
        refused=lambda cause: _update_refusal(
            workflow_id, cause, NotWaiting, "interactive agents", "request to complete its agent"
        ),
    )


def _update_refusal(
    workflow_id: str, cause: BaseException, kept: type[SpindleError], feature: str, what: str
) -> SpindleError:
    """An update the run refused: its own ``kept`` error as is; a run started before
    ``feature`` existed is a 409; anything else is logged and a 500 naming ``what``."""
    error = from_application_error(cause)
    if isinstance(error, kept):
        return error
    if is_missing_handler(cause):
        return Conflict(f"run '{workflow_id}' was started before {feature} existed")
    log.error("%s of %s failed: %r", what, workflow_id, cause)
    return SpindleError(f"the run could not take the {what}: {cause}")


async def file_uploaded(caller: Caller, workflow_id: str, upload: FileUploaded) -> None:
    """Tell a running run of an upload (``FileUploaded``); a closed run is left alone."""
    handle = caller.state.temporal.get_workflow_handle(workflow_id)
    try:
        await handle.signal(FILE_UPLOADED_SIGNAL, upload)
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:
            raise
        log.info("upload to %s: the run is not running (%s)", workflow_id, exc)


Result = TypeVar("Result", bound=BaseModel)


async def update_run(
    caller: Caller,
    workflow_id: str,
    *,
    name: str,
    argument: BaseModel,
    result_type: type[Result],
    update_id: str,
    refused: Callable[[BaseException], SpindleError],
) -> Result:
    """Count an update of the run against the tenant's signal limit, then run it.

    Raises:
        RateLimited: over ``rate_limit_signals`` (429, Retry-After).
        SpindleError: ``refused(cause)`` when the workflow refused the update, and
            what ``execute_run_update`` raises.
    """
    await caller.limits.check_signal(caller.tenant_id)
    state = caller.state
    return await execute_run_update(
        state.temporal,
        state.archive,
        workflow_id=workflow_id,
        name=name,
        argument=argument,
        result_type=result_type,
        update_id=update_id,
        refused=refused,
    )


async def raise_budget(caller: Caller, workflow_id: str, raised: BudgetRaise) -> BudgetAck:
    """Raise the run's budget caps (an update, counted as a signal of the tenant).

    Raises:
        RateLimited: over ``rate_limit_signals``.
        BudgetRefused, Conflict: a cap below what the run has spent, or a run
            started before budgets existed.
    """
    return await update_run(
        caller,
        workflow_id,
        name=RAISE_BUDGET_UPDATE,
        argument=raised,
        result_type=BudgetAck,
        update_id=f"budget-{uuid.uuid4().hex}",
        refused=lambda cause: _update_refusal(
            workflow_id, cause, BudgetRefused, "budgets", "budget raise"
        ),
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
    if type(error) is Conflict:  # e.g. the agent's inbox is full
        return error
    if is_missing_handler(cause):
        return _OldRun(f"run '{workflow_id}' has no user_message update")
    log.error("UserInput update of %s failed: %r", workflow_id, cause)
    return SpindleError(f"the run could not take the input: {cause}")
