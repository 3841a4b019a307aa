"""An AG-UI run: start the Spindle run, or answer its interrupt, or re-attach; then stream.

``open_agui_run`` decides what a ``RunAgentInput`` is (docs/protocols/agui.md):

- a ``runId`` already seen on the thread: a reconnect. Nothing is started or
  answered again; the stream is the same segment, after ``Last-Event-ID``.
- ``resume``: the answer to the interrupt the thread's run waits on, delivered
  through ``services.run_input.signal_run`` (validated exactly as ``POST …/signal/UserInput``);
  the new AG-UI run follows the messages after the prompt. A ``cancelled`` entry
  takes the prompt's ``on_cancel`` (``cancel_run`` by default, or ``keep_waiting``).
- no ``resume`` on a thread whose run is still live: refused while the run waits
  on a prompt (AG-UI: pending interrupts block new input); otherwise the last
  user message goes to the run's listening agent (``user_message``, as
  ``POST …/signal/UserInput`` does) and the AG-UI run follows its answer.
- otherwise: a new Spindle run of the graph (through ``services.run_starts``), and
  the thread now stands for it.

Inputs the AG-UI interrupt rules refuse (a missing, unknown, stale, expired or
refused resume) are not HTTP errors: the stream is one ``RUN_ERROR`` with a
machine-readable ``code`` (``AguiRejection``), and nothing is started or answered.

``AguiEventStream`` then follows the run's messages (``services.run_streams``: the
gap-free follow every stream uses), maps them with ``SegmentMapper`` and writes
AG-UI SSE frames until the segment ends. A reconnect (``Last-Event-ID``
``<seq>.<k>``) works live and, for as long as the archive keeps the run, after
its end; a cursor that cannot be served whole is one RUN_ERROR with a ``code``:
CURSOR_EXPIRED (the segment's messages are no longer kept), CURSOR_BEYOND_END
(past the run's last message) or CURSOR_NOT_IN_RUN (an event id of another AG-UI
run), never a silent jump (docs/streaming/gap-free.md).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from typing import Any

from spindle.gateway.models import StartRunRequest
from spindle.gateway.protocols.a2a.task_mapping import single_required_string
from spindle.gateway.protocols.agui.event_mapper import (
    AguiEvent,
    SegmentEnd,
    SegmentMapper,
    interrupt_id,
    interrupt_seq,
)
from spindle.gateway.protocols.agui.models import (
    AguiRejection,
    AguiResumeEntry,
    AguiRunInput,
    RejectionCode,
)
from spindle.gateway.protocols.agui.threads import AguiRunRecord, AguiThreads
from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_control import RunStop, cancel_run
from spindle.gateway.services.run_input import RunSignal, signal_run
from spindle.gateway.services.run_starts import admit_start
from spindle.gateway.services.run_streams import RunFollow, check_closed, run_follower
from spindle.gateway.services.run_views import RunLookup, authorize, await_close, describe_run
from spindle.gateway.streams.cursor import (
    CURSOR_NOT_IN_RUN,
    CursorBeyondEnd,
    CursorExpired,
    CursorOutOfRange,
    reached,
)
from spindle.gateway.streams.follower import Sequenced
from spindle.gateway.streams.history import stored_messages
from spindle.shared.contracts.errors import (
    Conflict,
    NotFound,
    PromptExpired,
    ValidationFailed,
)
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.contracts.runs import RunStatus, UserInput

log = logging.getLogger(__name__)

KEEPALIVE = b": keep-alive\n\n"
# How long the end of a run may take to show in Temporal after its last message.
CLOSE_WAIT = timedelta(seconds=20)
# A thread's run in one of these may still take input: the thread is not free.
LIVE_STATUSES = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED})


async def open_agui_run(
    call: Caller, graph: str, body: AguiRunInput, *, reconnecting: bool
) -> AguiRunRecord | AguiRejection:
    """The segment this request streams (re-attached, resumed, messaged or newly
    started), or the rejection its stream reports as RUN_ERROR.

    Raises:
        NotFound: an unknown graph, or AG-UI run on a reconnect.
        Forbidden: a caller who may not control the thread's run (403).
        ValidationFailed: bad run input (422).
    """
    threads = AguiThreads(call.state.bus)
    tenant, thread, run_id = call.tenant_id, body.thread_id, body.run_id
    if not await threads.claim_run(tenant, thread, run_id):
        record = await threads.run(tenant, thread, run_id)
        if record is None:
            raise Conflict(f"AG-UI run '{run_id}' is still being started; retry")
        await _authorize(call, record.workflow_id, RunAction.READ)
        return record
    if reconnecting:
        await threads.release_run(tenant, thread, run_id)
        raise NotFound(f"AG-UI run '{run_id}' of thread '{thread}' was not found")
    try:
        if body.resume:
            outcome = await _resume(call, threads, graph, body)
        else:
            outcome = await _new_input(call, threads, graph, body)
    except BaseException:
        await threads.release_run(tenant, thread, run_id)
        raise
    if isinstance(outcome, AguiRejection):
        await threads.release_run(tenant, thread, run_id)  # nothing started: the id is free
        return outcome
    await threads.save_run(tenant, thread, run_id, outcome)
    return outcome


async def _authorize(call: Caller, workflow_id: str, action: RunAction) -> None:
    await authorize(call, workflow_id, action)


def run_input(body: AguiRunInput, input_schema: dict[str, Any] | None) -> Any:
    """The Spindle run input of a RunAgentInput (docs/protocols/agui.md)."""
    given, value = body.forwarded_input()
    if given:
        return value
    text = body.last_user_text()
    name = single_required_string(input_schema)
    return {name: text} if name is not None else text


async def _current_run(call: Caller, threads: AguiThreads, thread_id: str) -> str | None:
    """The run the thread stands for, if the caller may rebind it (else 403).

    Rebinding a thread needs the right to control its run (its owner or a
    run-control role), as answering it does; a thread whose run is gone is free.
    """
    current = await threads.thread_run(call.tenant_id, thread_id)
    if current is None:
        return None
    # A run that no longer exists anywhere (NotFound): the thread stands for nothing.
    with contextlib.suppress(NotFound):
        await _authorize(call, current, RunAction.CONTROL)
    return current


async def _new_input(
    call: Caller, threads: AguiThreads, graph: str, body: AguiRunInput
) -> AguiRunRecord | AguiRejection:
    """Input without ``resume``: to the thread's live run, or a new run."""
    current = await _current_run(call, threads, body.thread_id)
    if current is not None:
        try:
            detail = await describe_run(call, RunLookup(workflow_id=current))
        except NotFound:
            detail = None  # the run is gone: the thread is free
        if detail is not None and detail.status in LIVE_STATUSES:
            if detail.pending_input is not None:
                node = detail.pending_input.node_id
                return AguiRejection(
                    code=RejectionCode.INTERRUPT_PENDING,
                    message=f"thread '{body.thread_id}' has a pending interrupt (its run "
                    f"waits on the prompt of node '{node}'): resume it first",
                    metadata={"workflowId": current, "nodeId": node},
                )
            return await _send_message(call, graph, body, current)
    return await _start(call, threads, graph, body, current)


async def _send_message(
    call: Caller, graph: str, body: AguiRunInput, workflow_id: str
) -> AguiRunRecord | AguiRejection:
    """The last user message to the live run's listening agent; the AG-UI run follows
    its answer, up to the agent's next IDLE (docs/conversations.md)."""
    last = body.messages[-1] if body.messages else None
    text = body.last_user_text() if last is not None and last.role == "user" else ""
    busy = f"thread '{body.thread_id}' stands for run '{workflow_id}', which is still running"
    if not text:
        return AguiRejection(
            code=RejectionCode.RUN_BUSY,
            message=f"{busy}: send a new user message for its agent, or wait for its end",
            metadata={"workflowId": workflow_id},
        )
    # The cursor before the message: nothing the run posts about it is missed.
    start = await call.state.bus.last_seq(workflow_id)
    sent_id = f"agui-{body.run_id}"[:200]  # the same AG-UI run sends once
    message = UserInput(
        message=text,
        client_message_id=sent_id,
        metadata={"protocol": "ag-ui", "thread_id": body.thread_id, "message_id": last.id}
        if last is not None
        else None,
    )
    try:
        await signal_run(call, RunSignal(workflow_id=workflow_id, input=message))
    except Conflict as exc:  # no agent listens (or its inbox is full)
        return AguiRejection(
            code=RejectionCode.RUN_BUSY,
            message=f"{busy} and takes no message now: {exc.detail}",
            metadata={"workflowId": workflow_id},
        )
    return AguiRunRecord(workflow_id=workflow_id, start_seq=start, graph=graph, awaits=sent_id)


async def _start(
    call: Caller, threads: AguiThreads, graph: str, body: AguiRunInput, current: str | None
) -> AguiRunRecord:
    admitted = await admit_start(call)
    spec = await admitted.graph(graph)
    request = StartRunRequest(graph=graph, input=run_input(body, spec.input_schema))
    # A retried start of the same AG-UI run is the same Spindle run.
    key = f"agui:{body.thread_id}:{body.run_id}"
    started, _ = await admitted.start(request, idempotency_key=key)
    tenant = call.tenant_id
    if started.workflow_id != current and not await threads.bind_thread(
        tenant, body.thread_id, started.workflow_id, current=current
    ):
        raise Conflict(
            f"thread '{body.thread_id}' was given another run meanwhile; run "
            f"'{started.workflow_id}' was started but is not the thread's"
        )
    return AguiRunRecord(workflow_id=started.workflow_id, start_seq=0, graph=graph)


def _refused_errors(exc: ValidationFailed) -> list[dict[str, Any]]:
    """The prompt's refusal, its fields named where they are in the request."""
    errors = []
    for error in exc.errors or []:
        field = error.get("field")
        where = f"resume.0.payload.{field}" if field else "resume.0.payload"
        errors.append({**error, "field": where})
    return errors


def _unknown(body: AguiRunInput, interrupt: str, why: str) -> AguiRejection:
    return AguiRejection(
        code=RejectionCode.UNKNOWN_INTERRUPT,
        message=f"thread '{body.thread_id}' has no open interrupt '{interrupt}': {why}",
        metadata={"interruptId": interrupt},
    )


def _expired(details: dict[str, Any]) -> bool:
    expires = details.get("expires_at")
    if not isinstance(expires, str):
        return False
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(expires) <= datetime.now(UTC)
    return False


async def _resume(
    call: Caller, threads: AguiThreads, graph: str, body: AguiRunInput
) -> AguiRunRecord | AguiRejection:
    """Answer (or abandon) the thread's interrupt; the new segment starts after the prompt."""
    entries = body.resume or []
    entry = entries[0]
    workflow_id = await threads.thread_run(call.tenant_id, body.thread_id)
    if workflow_id is None:  # unknown thread (another tenant's too): nothing to correlate
        return _unknown(body, entry.interrupt_id, "the thread has no run")
    try:
        await _authorize(call, workflow_id, RunAction.CONTROL)
    except NotFound:
        return _unknown(body, entry.interrupt_id, "the thread's run no longer exists")
    seq = interrupt_seq(entry.interrupt_id)
    prompt = await _prompt_at(call, workflow_id, seq) if seq is not None else None
    if seq is None or prompt is None:
        return _unknown(body, entry.interrupt_id, "never raised, answered, or superseded")
    if len(entries) > 1:
        others = [e.interrupt_id for e in entries[1:]]
        return _unknown(body, others[0], f"the run waits on '{entry.interrupt_id}' only")
    details = prompt.d if isinstance(prompt.d, dict) else {}
    if entry.status == "cancelled":
        return await _abandon(call, graph, body, workflow_id=workflow_id, seq=seq, details=details)
    if _expired(details):
        return AguiRejection(
            code=RejectionCode.INTERRUPT_EXPIRED,
            message=f"interrupt '{entry.interrupt_id}' expired at {details['expires_at']}: "
            "it can only be cancelled now",
            metadata={"interruptId": entry.interrupt_id, "expiresAt": details["expires_at"]},
        )
    signal = RunSignal(workflow_id=workflow_id, input=_answer(entry, prompt, body.run_id))
    try:
        await signal_run(call, signal)
    except ValidationFailed as exc:
        return AguiRejection(
            code=RejectionCode.INVALID_RESUME,
            message=f"the answer to '{entry.interrupt_id}' was refused: {exc.detail}",
            metadata={"interruptId": entry.interrupt_id, "errors": _refused_errors(exc)},
        )
    except PromptExpired as exc:
        return AguiRejection(
            code=RejectionCode.INTERRUPT_EXPIRED,
            message=exc.detail,
            metadata={"interruptId": entry.interrupt_id},
        )
    except Conflict as exc:  # answered meanwhile, or no longer waiting
        return _unknown(body, entry.interrupt_id, exc.detail)
    return AguiRunRecord(workflow_id=workflow_id, start_seq=seq, graph=graph)


async def _abandon(
    call: Caller,
    graph: str,
    body: AguiRunInput,
    *,
    workflow_id: str,
    seq: int,
    details: dict[str, Any],
) -> AguiRunRecord | AguiRejection:
    """A ``cancelled`` resume: the prompt's ``on_cancel`` (docs/graphs/node-types.md).

    ``cancel_run`` (the default) cancels the run: the AG-UI run ends ``cancelled``.
    ``keep_waiting`` leaves the run as it is: the AG-UI run asks the same
    interrupt again (its segment starts at the prompt).
    """
    interrupt = interrupt_id(seq)
    if details.get("on_cancel") == "keep_waiting":
        return AguiRunRecord(workflow_id=workflow_id, start_seq=seq - 1, graph=graph)
    stop = RunStop(workflow_id=workflow_id, reason=f"AG-UI interrupt '{interrupt}' was cancelled")
    try:
        await cancel_run(call, stop)
    except Conflict as exc:  # the run ended meanwhile
        return _unknown(body, interrupt, exc.detail)
    return AguiRunRecord(workflow_id=workflow_id, start_seq=seq, graph=graph)


async def _prompt_at(call: Caller, workflow_id: str, seq: int) -> CompactMessage | None:
    """The main workstream's REQUEST_INPUT stored at ``seq``, while it is still open.

    None when there is no such prompt, or when it was answered already or a later
    prompt was asked (an old interrupt must not answer a new prompt of the same node).
    """
    state = call.state
    archive = state.archive_if_enabled()
    stored = await stored_messages(workflow_id, bus=state.bus, archive=archive, after_seq=seq - 1)
    if not stored or stored[0].seq != seq:
        return None
    message = CompactMessage.model_validate_json(stored[0].raw)
    if message.t != AgentMessageType.REQUEST_INPUT or message.w is not None:
        return None
    closing = (AgentMessageType.QUESTION, AgentMessageType.REQUEST_INPUT)
    for later in stored[1:]:
        after = CompactMessage.model_validate_json(later.raw)
        if after.w is None and after.t in closing:
            return None  # answered, or a newer prompt asked: this interrupt is closed
    return message


def _answer(entry: AguiResumeEntry, prompt: CompactMessage, run_id: str) -> UserInput:
    """The resume entry as the run's ``UserInput`` for the prompt it answers."""
    details = prompt.d if isinstance(prompt.d, dict) else {}
    node = details.get("node_id")
    payload = entry.payload
    return UserInput(
        message=payload if isinstance(payload, str) else None,
        data=payload if isinstance(payload, dict) else None,
        # The same AG-UI run answers once, however often it is posted.
        client_message_id=f"agui-{run_id}"[:200],
        node_id=node if isinstance(node, str) else None,
        metadata={"protocol": "ag-ui", "interrupt_id": entry.interrupt_id},
    )


def _renumbered(events: list[AguiEvent]) -> list[AguiEvent]:
    """``events`` with each message's events numbered 0, 1, … in order.

    The segment's last message has the events ``feed`` built and those ``finish``
    added, each numbered from 0: as one list their ids stay unique, so a
    reconnect after any of them resumes at the next.
    """
    out: list[AguiEvent] = []
    for event in events:
        index = out[-1].index + 1 if out and out[-1].seq == event.seq else 0
        out.append(AguiEvent(event.seq, index, event.body))
    return out


def _cursor_rejection(exc: CursorOutOfRange) -> AguiRejection:
    code = RejectionCode(exc.code)
    metadata = {k: v for k, v in exc.data().items() if k != "reason" and v is not None}
    return AguiRejection(code=code, message=exc.detail, metadata=metadata)


class AguiEventStream:
    """The AG-UI events of one segment, as SSE frames, after the client's cursor.

    Args:
        call: who streams.
        body: the request (its thread and run ids name the AG-UI run).
        record: the segment (``open_agui_run``).
        after: the client's last event id as ``(seq, index)``, or None.
    """

    def __init__(
        self,
        call: Caller,
        body: AguiRunInput,
        record: AguiRunRecord,
        after: tuple[int, int] | None,
    ) -> None:
        self._call = call
        self._record = record
        self._after = after
        self._rejection: AguiRejection | None = None
        self._last_id = (record.start_seq, -1)
        self._mapper = SegmentMapper(
            thread_id=body.thread_id,
            run_id=body.run_id,
            workflow_id=record.workflow_id,
            start_seq=record.start_seq,
            sent=body.sent_messages(),
            awaits=record.awaits,
        )
        follow = RunFollow(workflow_id=record.workflow_id, after_seq=record.start_seq)
        self._follower = run_follower(call, follow, keepalive=True)

    async def open(self) -> None:
        """Subscribe, then read the backlog: nothing posted from here on is missed.

        A cursor the segment cannot serve whole makes the stream one RUN_ERROR.
        """
        try:
            await self._check_cursor()
            await self._follower.open()
        except CursorOutOfRange as exc:
            self._rejection = _cursor_rejection(exc)

    async def _check_cursor(self) -> None:
        """Refuse an event id of another AG-UI run, or one past the run's last message."""
        if self._after is None:
            return
        seq, start = self._after[0], self._record.start_seq
        workflow_id = self._record.workflow_id
        if seq < start:
            raise _NotInRun(workflow_id, seq, start)
        state = self._call.state
        last = await reached(workflow_id, seq, bus=state.bus, archive=state.archive_if_enabled())
        if last < seq:
            raise CursorBeyondEnd(workflow_id, seq, last)

    async def close(self) -> None:
        await self._follower.close()

    def _frames(self, events: list[AguiEvent]) -> bytes:
        if events:
            self._last_id = (events[-1].seq, events[-1].index)
        return b"".join(e.frame() for e in events if e.after(self._after))

    def _past_the_end(self) -> bytes:
        """A RUN_ERROR when the cursor lies past every event of this AG-UI run."""
        if self._after is None or self._after <= self._last_id:
            return b""
        error = _NotInRun(self._record.workflow_id, self._after[0], self._record.start_seq)
        return _cursor_rejection(error).frame()

    async def frames(self) -> AsyncGenerator[bytes, None]:
        """SSE frames until the AG-UI run ends (keep-alive comments when idle)."""
        if self._rejection is not None:
            yield self._rejection.frame()
            return
        mapper = self._mapper
        yield self._frames(mapper.opening()) or KEEPALIVE
        idle = 0
        every = self._call.state.settings.sse_closed_check_keepalives
        async with contextlib.aclosing(self._follower.batches()) as batches:
            while (batch := await self._next(batches)) is not None:
                if isinstance(batch, CursorExpired):
                    yield _cursor_rejection(batch).frame()
                    return
                if not batch:
                    idle += 1
                    if every and idle % every == 0:
                        await self._closed_check()
                    yield KEEPALIVE
                    continue
                idle = 0
                out: list[bytes] = []
                for stored in batch:
                    message = CompactMessage.model_validate_json(stored.raw)
                    events = mapper.feed(stored.seq, message)
                    if mapper.end is not None:
                        events = _renumbered(events + mapper.finish(await self._result()))
                        out.append(self._frames(events))
                        yield b"".join(out) + self._past_the_end()
                        return
                    out.append(self._frames(events))
                chunk = b"".join(out)
                if chunk:
                    yield chunk

    @staticmethod
    async def _next(
        batches: AsyncGenerator[list[Sequenced], None],
    ) -> list[Sequenced] | CursorExpired | None:
        """The follower's next batch; what a catch-up found no longer kept; None at the end."""
        try:
            return await anext(batches)
        except StopAsyncIteration:
            return None
        except CursorExpired as exc:
            return exc

    async def _closed_check(self) -> None:
        """A run Temporal closed without Spindle gets its closing message (ends the stream)."""
        try:
            await check_closed(self._call, self._record.workflow_id)
        except Exception as exc:  # the stream goes on; the next check retries
            log.info("agui %s: closed-run check failed: %r", self._record.workflow_id, exc)

    async def _result(self) -> Any:
        """The run's output, once Temporal reports it closed (completed runs only)."""
        if self._mapper.end != SegmentEnd.COMPLETED:
            return None
        workflow_id = self._record.workflow_id
        if not await await_close(self._call, workflow_id, CLOSE_WAIT.total_seconds()):
            log.warning("agui: run %s did not close within %s", workflow_id, CLOSE_WAIT)
        detail = await describe_run(self._call, RunLookup(workflow_id=workflow_id))
        return detail.output if detail.status == RunStatus.COMPLETED else None


class _NotInRun(CursorOutOfRange):
    """An AG-UI event id outside this AG-UI run's segment (another run's)."""

    code = CURSOR_NOT_IN_RUN

    def __init__(self, workflow_id: str, seq: int, start_seq: int) -> None:
        super().__init__(
            workflow_id,
            seq,
            f"Last-Event-ID {seq}.* is not an event of this AG-UI run (its events start at "
            f"{start_seq}.0 and end before it): an event id of another run",
            {"startSeq": start_seq},
        )
