"""An AG-UI run: start the Spindle run, or answer its interrupt, or re-attach; then stream.

``open_agui_run`` decides what a ``RunAgentInput`` is (docs/protocols/agui.md):

- a ``runId`` already seen on the thread: a reconnect. Nothing is started or
  answered again; the stream is the same segment, after ``Last-Event-ID``.
- ``resume``: the answer to the interrupt the thread's run waits on, delivered
  through ``services.run_input.signal_run`` (validated exactly as ``POST …/signal/UserInput``);
  the new AG-UI run follows the messages after the prompt.
- otherwise: a new Spindle run of the graph (through ``services.run_starts``), and
  the thread now stands for it.

``AguiEventStream`` then follows the run's messages (``services.run_streams``: the
gap-free follow every stream uses), maps them with ``SegmentMapper`` and writes
AG-UI SSE frames until the segment ends.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any

from spindle.gateway.models import StartRunRequest
from spindle.gateway.protocols.a2a.task_mapping import single_required_string
from spindle.gateway.protocols.agui.event_mapper import (
    AguiEvent,
    SegmentEnd,
    SegmentMapper,
    interrupt_seq,
)
from spindle.gateway.protocols.agui.models import AguiResumeEntry, AguiRunInput
from spindle.gateway.protocols.agui.threads import AguiRunRecord, AguiThreads
from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_input import RunSignal, signal_run
from spindle.gateway.services.run_starts import admit_start
from spindle.gateway.services.run_streams import RunFollow, check_closed, run_follower
from spindle.gateway.services.run_views import RunLookup, authorize, await_close, describe_run
from spindle.gateway.streams.history import stored_messages
from spindle.shared.contracts.errors import Conflict, NotFound, ValidationFailed
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.contracts.runs import RunStatus, UserInput

log = logging.getLogger(__name__)

KEEPALIVE = b": keep-alive\n\n"
# How long the end of a run may take to show in Temporal after its last message.
CLOSE_WAIT = timedelta(seconds=20)


async def open_agui_run(
    call: Caller, graph: str, body: AguiRunInput, *, reconnecting: bool
) -> AguiRunRecord:
    """The segment this request streams: re-attached, resumed or newly started.

    Raises:
        NotFound: an unknown graph, thread (another tenant's too) or AG-UI run.
        ValidationFailed: bad run input, or an answer the prompt refuses (422).
        Conflict: the thread's run does not wait on that interrupt (409).
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
            record = await _resume(call, threads, graph, body, body.resume[0])
        else:
            record = await _start(call, threads, graph, body)
    except BaseException:
        await threads.release_run(tenant, thread, run_id)
        raise
    await threads.save_run(tenant, thread, run_id, record)
    return record


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


async def _start(
    call: Caller, threads: AguiThreads, graph: str, body: AguiRunInput
) -> AguiRunRecord:
    admitted = await admit_start(call)
    spec = await admitted.graph(graph)
    request = StartRunRequest(graph=graph, input=run_input(body, spec.input_schema))
    # A retried start of the same AG-UI run is the same Spindle run.
    key = f"agui:{body.thread_id}:{body.run_id}"
    started, _ = await admitted.start(request, idempotency_key=key)
    await threads.set_thread_run(call.tenant_id, body.thread_id, started.workflow_id)
    return AguiRunRecord(workflow_id=started.workflow_id, start_seq=0, graph=graph)


def _resume_error(field: str, detail: str) -> ValidationFailed:
    return ValidationFailed(detail, errors=[{"field": field, "rule": "resume", "message": detail}])


def _answer_refused(exc: ValidationFailed) -> ValidationFailed:
    """The prompt's refusal, its fields named where they are in the request."""
    errors = []
    for error in exc.errors:
        field = error.get("field")
        where = f"resume.0.payload.{field}" if field else "resume.0.payload"
        errors.append({**error, "field": where})
    return ValidationFailed(exc.detail, errors=errors or None)


async def _resume(
    call: Caller,
    threads: AguiThreads,
    graph: str,
    body: AguiRunInput,
    entry: AguiResumeEntry,
) -> AguiRunRecord:
    """Answer the thread's interrupt; the new segment starts after the prompt."""
    workflow_id = await threads.thread_run(call.tenant_id, body.thread_id)
    if workflow_id is None:
        raise NotFound(f"thread '{body.thread_id}' was not found")
    await _authorize(call, workflow_id, RunAction.CONTROL)
    seq = interrupt_seq(entry.interrupt_id)
    prompt = await _prompt_at(call, workflow_id, seq) if seq is not None else None
    if seq is None or prompt is None:
        raise Conflict(
            f"thread '{body.thread_id}' has no interrupt '{entry.interrupt_id}'",
            errors=[{"field": "resume.0.interruptId", "rule": "unknown_interrupt"}],
        )
    if entry.status == "cancelled":
        raise _resume_error(
            "resume.0.status", "a Spindle prompt cannot be cancelled: answer it, or cancel the run"
        )
    signal = RunSignal(workflow_id=workflow_id, input=_answer(entry, prompt, body.run_id))
    try:
        await signal_run(call, signal)
    except ValidationFailed as exc:
        raise _answer_refused(exc) from exc
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
        self._mapper = SegmentMapper(
            thread_id=body.thread_id,
            run_id=body.run_id,
            workflow_id=record.workflow_id,
            start_seq=record.start_seq,
        )
        follow = RunFollow(workflow_id=record.workflow_id, after_seq=record.start_seq)
        self._follower = run_follower(call, follow, keepalive=True)

    async def open(self) -> None:
        """Subscribe, then read the backlog: nothing posted from here on is missed."""
        await self._follower.open()

    async def close(self) -> None:
        await self._follower.close()

    def _frames(self, events: list[AguiEvent]) -> bytes:
        return b"".join(e.frame() for e in events if e.after(self._after))

    async def frames(self) -> AsyncGenerator[bytes, None]:
        """SSE frames until the AG-UI run ends (keep-alive comments when idle)."""
        mapper = self._mapper
        yield self._frames(mapper.opening()) or KEEPALIVE
        idle = 0
        every = self._call.state.settings.sse_closed_check_keepalives
        async with contextlib.aclosing(self._follower.batches()) as batches:
            async for batch in batches:
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
                    out.append(self._frames(mapper.feed(stored.seq, message)))
                    if mapper.end is not None:
                        break
                if mapper.end is not None:
                    out.append(self._frames(mapper.finish(await self._result())))
                    yield b"".join(out)
                    return
                chunk = b"".join(out)
                if chunk:
                    yield chunk

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
