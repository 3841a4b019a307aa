"""Who or what ended a run that did not complete: the ``ended_by`` of a run.

``GET /runs/{id}`` (``ended_by``), the run document and the ``run.canceled``,
``run.terminated`` and ``run.timed_out`` webhooks (docs/protocols/outbound.md)
carry it beside ``error``, the reason in a sentence.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field


class EndedByKind(StrEnum):
    """What ended the run."""

    USER = "user"  # a cancel or terminate through the gateway; id: the user id
    RUN = "run"  # a later run of its conversation (interrupt, rollback); id: its workflow id
    OPERATOR = "operator"  # Temporal's UI, CLI or a client; id: its Temporal identity
    DEADLINE = "deadline"  # the run's deadline or Temporal's execution timeout
    BUDGET = "budget"  # a budget cap with on_exhausted: fail; id: the limit
    LIMIT = "limit"  # a Temporal limit (history size, event count)


class EndedBy(BaseModel):
    """Who or what ended a run, and why."""

    kind: EndedByKind
    id: str | None = Field(
        None,
        description="the user id (user), workflow id (run), Temporal identity (operator) "
        "or limit name (budget)",
        max_length=300,
    )
    reason: str | None = Field(None, description="the reason given, if any", max_length=1000)
    how: str | None = Field(
        None, description="what was done, when more than the status says: interrupted, rolled back"
    )

    def sentence(self, verb: str) -> str:
        """``<how or verb> by <who>[: <reason>]``, e.g. ``canceled by user alice: not needed``."""
        who = {
            EndedByKind.USER: f"user {self.id}",
            EndedByKind.RUN: f"run {self.id}",
            EndedByKind.OPERATOR: f"{self.id} through Temporal" if self.id else "Temporal",
            EndedByKind.DEADLINE: "its deadline",
            EndedByKind.BUDGET: f"its budget ({self.id})" if self.id else "its budget",
            EndedByKind.LIMIT: f"Temporal's {self.id} limit" if self.id else "a Temporal limit",
        }[self.kind]
        return f"{self.how or verb} by {who}" + (f": {self.reason}" if self.reason else "")
