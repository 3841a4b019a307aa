"""Who may answer a prompt, and the record of every answer attempt the gateway refuses.

The gateway decides first, from the prompt as the worker recorded it (the
``prompts`` collection): a prompt with ``assignees`` or ``roles`` takes answers
only from those users, users with those roles, or users with a run-control role;
any other prompt from the run's owner or a run-control role. The workflow's
update validator decides again from the ``UserInput`` the gateway fills in
(``user_id``, ``roles``, ``run_control``): docs/operations/threat-model.md.

Refused attempts (403, 409, 422) are kept here, under the update's id, so a
retried request is kept once; accepted ones are kept by the worker's
``accept_input`` (``spindle.shared.store.prompts``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from spindle.gateway.runs.access import RunAction, RunOwner, check_run_access
from spindle.shared.contracts.errors import (
    AlreadyAnswered,
    Conflict,
    Forbidden,
    PromptExpired,
    SpindleError,
    ValidationFailed,
)
from spindle.shared.contracts.identity import Identity
from spindle.shared.contracts.runs import UserInput
from spindle.shared.platform.settings import Settings
from spindle.shared.store.prompts import AnswerAttempt, AnswerOutcome, PromptRecord, PromptStore

log = logging.getLogger(__name__)


def may_control(identity: Identity, settings: Settings) -> bool:
    """Whether the caller has a run-control role (or auth is off)."""
    return identity.method == "disabled" or identity.has_any_role(settings.run_control_roles)


def answering_as(user_input: UserInput, identity: Identity, settings: Settings) -> UserInput:
    """``user_input`` as the authenticated caller gives it: never what the body claims."""
    return user_input.model_copy(
        update={
            "user_id": identity.user_id,
            "roles": list(identity.roles),
            "run_control": may_control(identity, settings),
        }
    )


async def prompt_for(
    prompts: PromptStore, workflow_id: str, node_id: str | None
) -> PromptRecord | None:
    """The prompt the answer is for, as recorded; None if unknown or unreadable."""
    try:
        return await prompts.prompt_for(workflow_id, node_id)
    except Exception as exc:  # MongoDB down: the workflow's validator still decides
        log.warning("prompts of %s unavailable: %s", workflow_id, exc)
        return None


async def mark_answered(prompts: PromptStore, prompt: PromptRecord | None) -> None:
    """Take an answered prompt out of the inbox; the worker marks it too (idempotent)."""
    if prompt is None:
        return
    try:
        await prompts.answered(prompt)
    except Exception as exc:
        log.warning(
            "prompt %s of %s not marked answered: %s", prompt.node_id, prompt.workflow_id, exc
        )


def authorize_answer(
    prompt: PromptRecord | None,
    identity: Identity,
    settings: Settings,
    owner: RunOwner | None,
    workflow_id: str,
) -> None:
    """Refuse a caller who may not answer ``prompt`` (see the module docstring).

    Raises:
        Forbidden: not an assignee, assigned role or run-control role of an
            assigned prompt; for any other prompt, not the owner nor run-control.
    """
    if prompt is not None and (prompt.assignees or prompt.roles):
        if not prompt.may_answer(identity.user_id, identity.roles, may_control(identity, settings)):
            named = [f"user {u}" for u in prompt.assignees] + [f"role {r}" for r in prompt.roles]
            raise Forbidden(
                f"prompt '{prompt.node_id}' may be answered only by "
                f"{', '.join(named)} or a run-control role",
                context={"node_id": prompt.node_id},
            )
        return
    if owner is not None:
        check_run_access(owner, identity, RunAction.CONTROL, settings, workflow_id)


def outcome_of(error: SpindleError) -> AnswerOutcome | None:
    """The attempt outcome a refusal stands for; None for failures that are not one."""
    if isinstance(error, PromptExpired):
        return AnswerOutcome.LATE
    if isinstance(error, AlreadyAnswered):
        return AnswerOutcome.DUPLICATE
    if isinstance(error, Forbidden):
        return AnswerOutcome.FORBIDDEN
    if isinstance(error, ValidationFailed):
        return AnswerOutcome.INVALID
    if isinstance(error, Conflict):
        return AnswerOutcome.NOT_WAITING
    return None


async def keep_refusal(
    prompts: PromptStore,
    *,
    update_id: str,
    workflow_id: str,
    identity: Identity,
    user_input: UserInput,
    prompt: PromptRecord | None,
    error: SpindleError,
) -> None:
    """Keep a refused attempt; a failure to keep it is logged, never shown to the caller."""
    outcome = outcome_of(error)
    if outcome is None:
        return
    node_id = user_input.node_id or error.context.get("node_id")
    if node_id is None and prompt is not None:
        node_id = prompt.node_id
    try:
        await prompts.record_attempt(
            f"{update_id}:{outcome.value}",
            AnswerAttempt(
                workflow_id=workflow_id,
                tenant_id=identity.tenant_id,
                node_id=node_id,
                visit=prompt.visit if prompt is not None and prompt.node_id == node_id else None,
                user_id=identity.user_id,
                at=datetime.now(UTC),
                outcome=outcome,
                detail=error.detail,
                client_message_id=user_input.client_message_id,
            ),
        )
    except Exception as exc:
        log.warning("answer attempt on %s not kept: %s", workflow_id, exc)
