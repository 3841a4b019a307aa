"""The prompts of one run: ask, wait for a valid answer or the expiry, accept.

A ``prompt`` node (docs/graphs/node-types.md) runs ``HumanInput.ask``: the
``request_input`` activity posts the prompt and files it in the inbox, the run
waits for the ``user_input`` update (``accept_answer``, checked first by
``check_answer``) or for the prompt's expiry, then ``accept_input`` or
``expire_input`` records the end. ``RunEngine`` holds one ``HumanInput``; its
update handler and validator call it directly.

Across continue-as-new (docs/graphs/long-runs.md) a prompt that has asked is
carried (``waiting``) and the next generation waits for its answer without
asking again (``restore``).

Workflow code: deterministic, no I/O; the clock is ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.errors import (
        AlreadyAnswered,
        Forbidden,
        InputInvalid,
        NodeFailed,
        NotWaiting,
        PromptExpired,
        to_application_error,
    )
    from spindle.shared.contracts.runs import (
        ASK_SETTLES_ON_CANCEL_PATCH,
        EXPIRY_USER,
        CarriedWait,
        ExpiryAction,
        PendingInput,
        SignalAck,
        UserInput,
    )
    from spindle.shared.graphs.node_params import ExpiryAnswer, PromptParams, default_ui_schema
    from spindle.shared.graphs.node_types import PROMPT
    from spindle.worker.contracts import (
        ACCEPT_INPUT,
        EXPIRE_INPUT,
        REQUEST_INPUT,
        InputAcceptance,
        InputExpiry,
        InputRequest,
        NodeExecution,
        NodeOutcome,
        policies,
    )
    from spindle.worker.contracts.param_resolution import resolve_params, validate_params
    from spindle.worker.contracts.prompt_answers import resolve_answer
    from spindle.worker.workflows.expression_budget import task_budget

# Since this patch a required text field answered with "" is refused (422), in the
# validator and in the handler alike (worker/contracts/prompt_answers.py).
BLANK_ANSWER_PATCH = "a-blank-required-answer-is-refused"


class HumanInput:
    """The run's prompts: open, answered, expired, and those carried across generations.

    Args:
        owner: who started the run (the prompt's inbox entry names them).
    """

    def __init__(self, owner: str | None) -> None:
        self._owner = owner
        self._pending: dict[str, PendingInput] = {}  # insertion order = oldest first
        self._answers: dict[str, tuple[dict[str, Any], UserInput]] = {}
        self._waiting: dict[str, CarriedWait] = {}  # prompts that asked; carried if we continue
        self._carried_waits: dict[str, CarriedWait] = {}
        # Prompts no longer open, by node: "answered" or "expired" (why a late answer is refused).
        self._closed: dict[str, str] = {}
        self._stopping = False  # the run is stopping its nodes: an ask that ends is cancelled
        self.asked = False
        """A prompt asked in any generation: ``finish_run`` then closes their records."""

    def restore(self, waits: dict[str, CarriedWait], asked: bool) -> None:
        """Take over the prompts the previous generation asked (continue-as-new)."""
        self._carried_waits = dict(waits)
        self.asked = asked

    # -- what the run reads ---------------------------------------------------------

    @property
    def answered(self) -> bool:
        """An answer was taken that its prompt's task has not yet picked up."""
        return bool(self._answers)

    @property
    def oldest_pending(self) -> PendingInput | None:
        """The prompt open the longest (what ``describe`` shows), if any."""
        return next(iter(self._pending.values()), None)

    def all_pending(self, node_ids: list[str]) -> bool:
        """Every one of ``node_ids`` is a prompt waiting for its answer."""
        return bool(self._pending) and set(node_ids) <= set(self._pending)

    def all_waiting(self, node_ids: Iterable[str]) -> bool:
        """Every one of ``node_ids`` is a prompt that has asked (it may be carried)."""
        return all(node_id in self._waiting for node_id in node_ids)

    def waits(self) -> dict[str, CarriedWait]:
        """The prompts that asked and wait, to carry to the next generation."""
        return dict(self._waiting)

    def stop(self) -> None:
        """The run stops its nodes: an ask that ends from now on counts as cancelled."""
        self._stopping = True

    def stopped(self) -> None:
        """The run's nodes have stopped: no prompt is open any more."""
        self._pending.clear()

    # -- the prompt node ------------------------------------------------------------

    async def ask(self, execution: NodeExecution) -> NodeOutcome:
        """Run a ``prompt`` node: ask (unless carried), wait, then accept or expire."""
        node = execution.node
        carried = self._carried_waits.pop(node.id, None)
        if carried is not None:
            # Asked by an earlier generation: wait for the answer without asking again;
            # its expiry (``pending.expires_at``) is carried with it.
            pending = carried.pending
            execution = execution.model_copy(update={"started_at": carried.started_at})
        else:
            pending = self._new_prompt(execution)
        self._pending[node.id] = pending
        self._closed.pop(node.id, None)
        try:
            if carried is None:
                self.asked = True
                await workflow.execute_activity(
                    REQUEST_INPUT,
                    InputRequest(execution=execution, pending=pending, owner=self._owner),
                    activity_id=f"{node.id}.{execution.visit}.ask",
                    start_to_close_timeout=policies.node_timeout(node),
                    retry_policy=policies.LIFECYCLE_RETRY,
                    task_queue=node.task_queue,
                    priority=policies.node_priority(node),
                    # It posts the prompt and files it in the inbox; a cancel must not
                    # let it do so after finish_run closed the run's prompts.
                    cancellation_type=policies.ask_cancellation(
                        workflow.patched(ASK_SETTLES_ON_CANCEL_PATCH)
                    ),
                )
                if self._stopping:
                    # The ask ended after the cancel reached it, and Temporal reports
                    # that as its result: the cancel still stands, nothing waits.
                    raise asyncio.CancelledError()
            self._waiting[node.id] = CarriedWait(
                visit=execution.visit, started_at=execution.started_at, pending=pending
            )
            answered = await self._answer_or_expiry(node.id, pending)
        finally:
            self._pending.pop(node.id, None)
            self._waiting.pop(node.id, None)
        if not answered:
            self._closed[node.id] = "expired"
            return await self._expire(execution, pending)
        answer, user_input = self._answers.pop(node.id)
        return await self._accept(execution, pending, answer, user_input)

    def _new_prompt(self, execution: NodeExecution) -> PendingInput:
        node = execution.node
        resolved = resolve_params(
            node, execution.state, templates=PROMPT.templates, budget=task_budget()
        )
        params = validate_params(node, resolved, PromptParams)
        now = workflow.now()
        expiry = params.on_expiry
        expires = params.expires_in_seconds
        return PendingInput(
            node_id=node.id,
            prompt=params.prompt,
            ui_schema=params.ui_schema or default_ui_schema(node.id, params.prompt, params.title),
            requested_at=now.isoformat(),
            title=params.title,
            visit=execution.visit,
            expires_at=(now + timedelta(seconds=expires)).isoformat() if expires else None,
            on_expiry=(
                None
                if not expires
                else ExpiryAction.ANSWER
                if isinstance(expiry, ExpiryAnswer)
                else ExpiryAction(expiry or ExpiryAction.FAIL)
            ),
            expiry_answer=expiry.answer if isinstance(expiry, ExpiryAnswer) else None,
            assignees=params.assignees,
            roles=params.roles,
            on_cancel=params.on_cancel,
        )

    async def _answer_or_expiry(self, node_id: str, pending: PendingInput) -> bool:
        """Wait for the answer, or until the prompt expires; True when answered.

        The expiry is a durable timer (only for prompts that expire, so runs of
        graphs without expiry keep their command sequence); a run continued as
        new waits only for what is left of it.
        """
        if pending.expires_at is None:
            await workflow.wait_condition(lambda: node_id in self._answers)
            return True
        left = datetime.fromisoformat(pending.expires_at) - workflow.now()
        if left > timedelta(0):
            # On timeout it expired; an answer in the same workflow task still wins.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: node_id in self._answers, timeout=left)
        return node_id in self._answers

    async def _expire(self, execution: NodeExecution, pending: PendingInput) -> NodeOutcome:
        """Take the prompt's ``on_expiry`` action (docs/graphs/node-types.md)."""
        node = execution.node
        outcome: NodeOutcome = await workflow.execute_activity(
            EXPIRE_INPUT,
            InputExpiry(execution=execution, pending=pending),
            result_type=NodeOutcome,
            activity_id=f"{node.id}.{execution.visit}.expire",
            start_to_close_timeout=policies.node_timeout(node),
            retry_policy=policies.LIFECYCLE_RETRY,
            task_queue=node.task_queue,
            priority=policies.node_priority(node),
        )
        if pending.on_expiry is ExpiryAction.ANSWER:
            answer = dict(pending.expiry_answer or {})
            user_input = UserInput(data=answer, user_id=EXPIRY_USER)
            return await self._accept(execution, pending, answer, user_input)
        if pending.on_expiry is ExpiryAction.SKIP:
            return outcome
        raise to_application_error(
            NodeFailed(
                f"prompt expired at {pending.expires_at} without an answer (on_expiry: fail)"
            )
        )

    async def _accept(
        self,
        execution: NodeExecution,
        pending: PendingInput,
        answer: dict[str, Any],
        user_input: UserInput,
    ) -> NodeOutcome:
        node = execution.node
        result: NodeOutcome = await workflow.execute_activity(
            ACCEPT_INPUT,
            InputAcceptance(
                execution=execution,
                pending=pending,
                answer=answer,
                user_input=user_input,
                # The update's workflow task: the condition woke in the same one.
                answered_at=workflow.now().isoformat(),
            ),
            result_type=NodeOutcome,
            activity_id=f"{node.id}.{execution.visit}.answer",
            start_to_close_timeout=policies.node_timeout(node),
            retry_policy=policies.LIFECYCLE_RETRY,
            task_queue=node.task_queue,
            priority=policies.node_priority(node),
        )
        return result

    # -- the user_input update ------------------------------------------------------

    def accept_answer(self, user_input: UserInput) -> SignalAck:
        """Take the answer to a pending prompt (``check_answer`` validated it first)."""
        pending = self._pending_for(user_input)
        # Runs that took a blank required text before it was refused replay so.
        answer = _checked_answer(
            pending, user_input, blank_required=not workflow.patched(BLANK_ANSWER_PATCH)
        )
        # Removed here, not when the prompt task resumes, so a second answer in
        # the same workflow task is refused instead of overwriting this one.
        del self._pending[pending.node_id]
        self._closed[pending.node_id] = "answered"
        self._answers[pending.node_id] = (answer, user_input)
        return SignalAck(status="accepted", message=f"answer to '{pending.node_id}' accepted")

    def check_answer(self, user_input: UserInput) -> None:
        """Refuse an answer no open prompt takes (see ``_pending_for``)."""
        _checked_answer(self._pending_for(user_input), user_input)

    def _pending_for(self, user_input: UserInput) -> PendingInput:
        """The prompt ``user_input`` answers, if it is still open and its sender may answer.

        Raises:
            ApplicationError: ``AlreadyAnswered`` / ``PromptExpired`` / ``NotWaiting``
                (409) when no such prompt is open, ``Forbidden`` (403) when the
                sender is not among its assignees (the gateway checked first:
                this is the second line, docs/operations/threat-model.md).
        """
        if user_input.node_id is not None:
            pending = self._pending.get(user_input.node_id)
        else:
            pending = self.oldest_pending
        if pending is None:
            raise to_application_error(self._not_waiting(user_input.node_id))
        if pending.expires_at is not None and workflow.now() >= datetime.fromisoformat(
            pending.expires_at
        ):
            raise to_application_error(
                PromptExpired(
                    f"prompt '{pending.node_id}' expired at {pending.expires_at}; "
                    "the answer came too late and was not taken",
                    context={"node_id": pending.node_id, "expires_at": pending.expires_at},
                )
            )
        if pending.assigned and not (
            user_input.run_control or pending.assigned_to(user_input.user_id, user_input.roles)
        ):
            raise to_application_error(
                Forbidden(
                    f"prompt '{pending.node_id}' may be answered only by {pending.answerers()}",
                    context={"node_id": pending.node_id},
                )
            )
        return pending

    def _not_waiting(self, node_id: str | None) -> NotWaiting:
        """Why no prompt takes this answer: answered already, expired, or never asked."""
        closed = node_id if node_id is not None else next(reversed(self._closed), None)
        why = self._closed.get(closed) if closed is not None else None
        context: dict[str, Any] = {"waiting_on": list(self._pending)}
        if why == "answered":
            return AlreadyAnswered(
                f"prompt '{closed}' was answered already; this answer was not taken",
                context={**context, "node_id": closed},
            )
        if why == "expired":
            return PromptExpired(
                f"prompt '{closed}' expired; the answer came too late and was not taken",
                context={**context, "node_id": closed},
            )
        if node_id is not None:
            return NotWaiting(
                f"the run is not waiting for input on node '{node_id}'", context=context
            )
        return NotWaiting("the run is not waiting for input")


def _checked_answer(
    pending: PendingInput, user_input: UserInput, *, blank_required: bool = False
) -> dict[str, Any]:
    try:
        return resolve_answer(pending, user_input, blank_required=blank_required)
    except InputInvalid as exc:
        raise to_application_error(exc) from None
