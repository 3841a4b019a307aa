"""What an agent hears of the workstreams it launched (docs/workstreams.md, "Hearing back").

A child launched by an agent's ``launch_workstream`` call remembers that agent's
node id (``launched_by``). When it has ended (any state) and settled (artifacts
merged, the SYSTEM message posted), its report waits for that agent: the agent's
session takes the reports at its next turn boundary (``take``), each once, in the
order the children ended, as ``system`` messages. An agent that answered while
children it launched with ``wait: true`` still run waits for them (``awaited``).
The ``wait_workstreams`` tool waits for named children, or all of the agent's
non-interactive ones, and returns their reports (``wait``).

Everything here is the supervisor's records of its children, so it crosses a
continue-as-new with them (``heard`` and ``end_seq`` are carried). A report is
bounded: the summary is trimmed when the child ends (``SUMMARY_CHARS``), the
error to ``ERROR_CHARS``, the artifact names to ``REPORT_ARTIFACTS``.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.errors import Conflict, UnknownWorkstream, to_application_error
    from spindle.shared.contracts.workstreams import (
        WORKSTREAM_REPORT_PREFIX,
        WaitWorkstreams,
        WorkstreamState,
        WorkstreamsWaited,
    )
    from spindle.worker.contracts import ChatMessage
    from spindle.worker.workflows.workstreams.parent_child_record import ChildRecord

REPORT_PREFIX = WORKSTREAM_REPORT_PREFIX
#: Artifact names a report lists (the rest are counted).
REPORT_ARTIFACTS = 20
#: Characters of a child's error a report keeps.
ERROR_CHARS = 1_000

_STATE_WORDS = {
    WorkstreamState.COMPLETED: "completed",
    WorkstreamState.FAILED: "failed",
    WorkstreamState.TIMEOUT: "timed out",
    WorkstreamState.CANCELED: "was stopped",
}


def child_name(child: ChildRecord) -> str:
    """``"<label>" (ws-<n>)``, or the launch id of a child launched without a label."""
    label = child.request.label
    return f'"{label}" ({child.launch_id})' if label else child.launch_id


def report_text(child: ChildRecord) -> str:
    """The report of an ended child: who, how it ended, its result, its artifacts."""
    outcome = child.outcome
    state = outcome.state if outcome is not None else child.state
    word = _STATE_WORDS.get(state, state.value)
    lines = [f"{REPORT_PREFIX} Workstream {child_name(child)} {word} (state: {state.value})."]
    if outcome is not None and outcome.summary:
        lines.append(f"Result: {outcome.summary}")
    elif state is WorkstreamState.COMPLETED:
        lines.append("Result: (no summary)")
    if outcome is not None and outcome.error:
        error = outcome.error
        if len(error) > ERROR_CHARS:
            error = error[: ERROR_CHARS - 1] + "…"
        lines.append(f"Error: {error}")
    names = list(child.merged or (outcome.artifacts if outcome is not None else []))
    if names:
        shown = ", ".join(names[:REPORT_ARTIFACTS])
        more = len(names) - REPORT_ARTIFACTS
        lines.append(f"Artifacts: {shown}" + (f" and {more} more" if more > 0 else ""))
    return "\n".join(lines)


def report_message(child: ChildRecord) -> ChatMessage:
    """The report as the agent is given it: a ``system`` message (see the module docstring)."""
    # Named: a notice kept where it arrived, not taken for the system prompt
    # (worker/activities/agent_memory.py).
    return ChatMessage(role="system", content=report_text(child), name="workstream_report")


class ChildReports:
    """The launching agents' side of a supervisor's children (see the module docstring).

    Args:
        children: the supervisor's children by launch id (shared, not copied).
    """

    def __init__(self, children: Mapping[str, ChildRecord]) -> None:
        self._children = children
        self._ends = 0

    def restored(self) -> None:
        """After adopting carried children: count ends on from theirs."""
        self._ends = max((c.end_seq for c in self._children.values()), default=0)

    def settled(self, child: ChildRecord) -> None:
        """``child`` has settled: its report is ready, after those of earlier ends."""
        if child.end_seq == 0:
            self._ends += 1
            child.end_seq = self._ends

    def _unheard(self, launched_by: str) -> list[ChildRecord]:
        ready = [
            c
            for c in self._children.values()
            if c.launched_by == launched_by and c.settled and c.end_seq and not c.heard
        ]
        return sorted(ready, key=lambda c: c.end_seq)

    def has(self, launched_by: str) -> bool:
        """A child launched by ``launched_by`` has ended and its report is not yet taken."""
        return bool(self._unheard(launched_by))

    def take(self, launched_by: str) -> list[ChatMessage]:
        """The reports not yet taken of ``launched_by``'s children, in end order; each once."""
        ready = self._unheard(launched_by)
        for child in ready:
            child.heard = True
        return [report_message(c) for c in ready]

    def awaited(self, launched_by: str) -> list[str]:
        """Names of ``launched_by``'s children launched with ``wait: true`` that have not
        settled (an agent that answered waits for them)."""
        return [
            child_name(c)
            for c in self._children.values()
            if c.launched_by == launched_by and c.wait and not c.settled
        ]

    def unheard_ids(self) -> set[str]:
        """Launch ids of every settled child whose report is still to be taken."""
        return {
            c.launch_id
            for c in self._children.values()
            if c.launched_by is not None and c.settled and not c.heard
        }

    # -- the wait_workstreams tool ---------------------------------------------------

    def _targets(self, launched_by: str, launch_ids: list[str] | None) -> list[ChildRecord]:
        if launch_ids is None:
            return [
                c
                for c in self._children.values()
                if c.launched_by == launched_by
                and (not c.request.interactive or (c.settled and not c.heard))
            ]
        targets = []
        for launch_id in dict.fromkeys(launch_ids):
            child = self._children.get(launch_id)
            if child is None:
                raise to_application_error(
                    UnknownWorkstream(
                        f"unknown workstream '{launch_id}'",
                        context={"launch_id": launch_id, "known": list(self._children)},
                    )
                )
            targets.append(child)
        return targets

    async def wait(self, launched_by: str, request: WaitWorkstreams) -> WorkstreamsWaited:
        """Wait until the requested children have settled, or the timeout; their reports.

        Raises:
            ApplicationError: ``UnknownWorkstream`` for an unknown id; ``Conflict`` for
                a running interactive child without ``timeout_seconds`` (it ends only
                when terminated).
        """
        targets = self._targets(launched_by, request.launch_ids)
        endless = [c for c in targets if c.request.interactive and not c.settled]
        if endless and request.timeout_seconds is None:
            names = ", ".join(child_name(c) for c in endless)
            raise to_application_error(
                Conflict(
                    f"interactive workstreams end only when terminated ({names}): "
                    "give timeout_seconds, or terminate them first",
                    context={"launch_ids": [c.launch_id for c in endless]},
                )
            )
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: all(c.settled for c in targets), timeout=request.timeout_seconds
            )
        timed_out = not all(c.settled for c in targets)
        ended = sorted((c for c in targets if c.settled), key=lambda c: c.end_seq)
        if request.launch_ids is None:
            ended = [c for c in ended if not c.heard]
        for child in ended:
            child.heard = True
        return WorkstreamsWaited(
            reports=[report_text(c) for c in ended],
            ended=[c.launch_id for c in ended],
            running=[child_name(c) for c in targets if not c.settled],
            timed_out=timed_out,
        )
