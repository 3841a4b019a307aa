"""Conversations with the agents of a run's main workstream (docs/conversations.md).

An ``agent`` node runs the agent loop with an ``AgentSession`` as its hooks
(``spindle.worker.workflows.agent_loop.AgentHooks``). The session is the agent's
inbox: user messages (the ``user_message`` update, each echoed as QUESTION with
its ``client_message_id`` and ``metadata``, a duplicate id taken once), uploads
(the ``FileUploaded`` signal) and the results of the children it launched
(``WorkstreamSupervisor.reports``). ``extra_messages``, the loop's turn
boundary, hands them to the model in that order, each once; nothing is given in
the middle of an LLM turn or a tool call.

After a final answer (``after_answer``) the agent goes on with whatever arrived
meanwhile; else an agent with awaited running children posts IDLE naming them and
waits for their results, and an ``interactive: true`` agent posts IDLE and waits
for the next message, a child's end, COMPLETE (the ``complete_agent`` update) or
``idle_timeout_seconds``. Otherwise the node ends with its answer, as before:
an agent that nothing reaches schedules exactly the commands it always did.

An idle agent is carried across continue-as-new (``CarriedAgent``): its
conversation by reference (the store's loop id and count, the unsent last
answer), its unread inbox and uploads, never the message list.

``AgentSessions`` is the run's registry: which agent listens, the validators of
the updates, the run's ordered posts (QUESTION, IDLE, SYSTEM, COMPLETE).

Workflow code: deterministic, no I/O; the clock is ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.errors import Conflict, NotWaiting, to_application_error
    from spindle.shared.contracts.messages import AgentMessageType
    from spindle.shared.contracts.runs import (
        CarriedAgent,
        CompleteAck,
        CompleteAgent,
        FileUploaded,
        SignalAck,
        UserInput,
    )
    from spindle.shared.graphs.node_params import DEFAULT_IDLE_TIMEOUT_SECONDS
    from spindle.worker.contracts import (
        POST_MESSAGE,
        ChatMessage,
        NodeExecution,
        RunNotice,
        RunRef,
        ToolCall,
        policies,
    )
    from spindle.worker.workflows.agent_loop import AgentReply, LoopResume
    from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor

PLAN_PATCH = "agent-posts-plan"
"""Histories recorded before an exchange's first tool-calling turn posted PLAN."""
PLAN_ARGUMENT_CHARS = 40
"""Characters of each argument a PLAN shows (the THOUGHT's details have them all)."""
READ_FILE_TOOL = "read_file"
"""The built-in tool that reads a run's files (worker/tools/builtin.py)."""
MAX_INBOX = 1000
"""User messages an agent may have queued, not yet taken; one more is refused (409)."""
MAX_SEEN_MESSAGE_IDS = 1000
"""The latest ``client_message_id`` values an agent remembers to take a duplicate once."""


class ConversationPosts:
    """The run's conversation posts, in order, one ``post_message`` local activity each
    (ids ``conv.<n>.<type>``, numbered over all generations; a QUESTION's id adds its
    update's id).

    The id is the post's dedup key on the stream. A local activity runs before its
    workflow task is committed: when a worker dies after a post but before the
    commit, the task's retry may say other things in another order (an update
    delivered with it is handled first). A bare ``conv.<n>`` then named a different
    post, which the stream dropped as a duplicate of the uncommitted one: a user's
    QUESTION was lost (tests/e2e/test_chat_worker_crash.py). With the type, and the
    update's id for a QUESTION, an id names one post only.

    Args:
        run: the run whose stream gets them.
        count: posts made by earlier generations.
    """

    def __init__(self, run: RunRef, count: int = 0) -> None:
        self._run = run
        self.count = count
        self._queue: list[tuple[str, RunNotice]] = []
        self._runner: asyncio.Task[None] | None = None

    def say(
        self,
        kind: AgentMessageType,
        text: str,
        details: dict[str, Any] | None = None,
        workstream_id: str | None = None,
        key: str | None = None,
    ) -> None:
        """Queue a post; it goes out after those queued before it (``key``: what
        names this post alone, e.g. the update that brought it)."""
        self.count += 1
        run = self._run
        if workstream_id is not None:
            run = run.model_copy(update={"workstream_id": workstream_id})
        notice = RunNotice(run=run, type=int(kind), text=text, details=details)
        activity_id = f"conv.{self.count}.{int(kind)}" + (f".{key}" if key else "")
        self._queue.append((activity_id, notice))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            activity_id, notice = self._queue[0]
            try:
                await workflow.execute_local_activity(
                    POST_MESSAGE,
                    notice,
                    activity_id=activity_id,
                    start_to_close_timeout=policies.LOCAL_ACTIVITY_START_TO_CLOSE,
                    retry_policy=policies.NOTICE_RETRY,
                )
            except ActivityError as exc:
                if is_cancelled_exception(exc):
                    raise
                workflow.logger.warning("cannot post %r: %s", notice.text, exc)
            self._queue.pop(0)

    async def flushed(self) -> None:
        """Wait until every queued post has gone out."""
        await workflow.wait_condition(lambda: not self._queue)


class AgentSession:
    """One agent node's inbox and wait (see the module docstring); the loop's hooks.

    Args:
        execution: the agent node's execution.
        workstreams: the run's children (their results for this agent).
        posts: the run's conversation posts.
        carried: the session an earlier generation carried (it waits first).
    """

    def __init__(
        self,
        execution: NodeExecution,
        *,
        workstreams: WorkstreamSupervisor,
        posts: ConversationPosts,
        carried: CarriedAgent | None = None,
    ) -> None:
        node = execution.node
        params = node.params
        self.node_id = node.id
        self.visit = execution.visit
        self.started_at = carried.started_at if carried else execution.started_at
        self.loop_id = carried.loop_id if carried else f"{node.id}.{execution.visit}"
        interactive = params.get("interactive")
        self.interactive = interactive is True
        self.listening = interactive is not False
        tools = params.get("tools")
        self._reads_files = isinstance(tools, list) and READ_FILE_TOOL in tools
        timeout = params.get("idle_timeout_seconds")
        self._idle_timeout = timedelta(
            seconds=timeout if isinstance(timeout, int) else DEFAULT_IDLE_TIMEOUT_SECONDS
        )
        self._workstreams = workstreams
        self._posts = posts
        self._inbox: list[UserInput] = list(carried.inbox) if carried else []
        self._uploads: list[FileUploaded] = list(carried.uploads) if carried else []
        self._seen: list[str] = list(carried.seen) if carried else []
        self._idle_until = (
            datetime.fromisoformat(carried.idle_until) if carried and carried.idle_until else None
        )
        self._idle_posted = carried.idle_posted if carried else False
        self.completed = carried.completed if carried else False
        self.idle = False
        self._awaited: list[str] = []  # the children the current wait is for
        # A user message is given only after the first turn: before it, the loop's
        # conversation has no opening, and the node's own prompt would be lost.
        self._turned = carried is not None
        # PLAN (docs/conversations.md): the next LLM turn opens an exchange; a message
        # was taken (a messaged agent plans like an interactive one).
        self._exchange_opens = True
        self._messaged = False
        self._plan_posted = False
        self._last: AgentReply | None = None
        self.resume = (
            LoopResume(
                stored=carried.stored,
                turn=carried.turn,
                unsent=[ChatMessage.model_validate(m) for m in carried.unsent],
                answer=carried.answer,
            )
            if carried is not None
            else None
        )

    # -- what arrives ---------------------------------------------------------------

    def check_message(self, user_input: UserInput) -> None:
        """Refuse a message when the inbox is full (``MAX_INBOX``)."""
        if len(self._inbox) >= MAX_INBOX and not self._duplicate(user_input):
            raise to_application_error(
                Conflict(
                    f"agent '{self.node_id}' has {len(self._inbox)} messages queued, its "
                    "maximum: wait for its answer, then send",
                    context={"node_id": self.node_id, "queued": len(self._inbox)},
                )
            )

    def take(self, user_input: UserInput) -> SignalAck:
        """Queue a message for the next turn boundary and echo it as QUESTION."""
        cmid = user_input.client_message_id
        if self._duplicate(user_input):
            return SignalAck(status="accepted", message=f"message {cmid} was taken already")
        if cmid is not None:
            self._seen = [*self._seen, cmid][-MAX_SEEN_MESSAGE_IDS:]
        self._inbox.append(user_input)
        self._messaged = True
        details: dict[str, Any] = {"node_id": self.node_id, "client_message_id": cmid}
        if user_input.metadata is not None:
            details["metadata"] = user_input.metadata
        if user_input.user_id is not None:
            details["user_id"] = user_input.user_id
        update = workflow.current_update_info()
        key = update.id if update is not None else cmid
        self._posts.say(AgentMessageType.QUESTION, _text_of(user_input), details, key=key)
        return SignalAck(status="accepted", message=f"message for agent '{self.node_id}' queued")

    def told(self, upload: FileUploaded) -> None:
        """An upload the agent hears of at its next turn boundary."""
        self._uploads.append(upload)

    def complete(self) -> None:
        """End after the current exchange (or now, if idle) with the last answer."""
        self.completed = True

    def _duplicate(self, user_input: UserInput) -> bool:
        cmid = user_input.client_message_id
        return cmid is not None and cmid in self._seen

    def _has_input(self) -> bool:
        """A user message or a child's result: what wakes an agent that answered (an
        upload alone does not: it is told with the next message)."""
        return bool(self._inbox and self._turned) or self._workstreams.reports.has(self.node_id)

    def _drain(self) -> list[ChatMessage]:
        """Everything that arrived, in order, each once: messages, uploads, children."""
        messages: list[ChatMessage] = []
        if self._turned:
            inbox, self._inbox = self._inbox, []
            messages += [ChatMessage(role="user", content=_text_of(m)) for m in inbox]
        uploads, self._uploads = self._uploads, []
        # Named: a notice in the conversation, not the system prompt (worker/activities/
        # agent_memory.py keeps a named system message where it arrived).
        messages += [
            ChatMessage(role="system", content=_upload_notice(u, self._reads_files), name="upload")
            for u in uploads
        ]
        messages += self._workstreams.reports.take(self.node_id)
        return messages

    # -- AgentHooks -----------------------------------------------------------------

    async def before_llm(self, turn: int) -> None:
        """Nothing to wait for before a turn."""

    async def before_tool(self, turn: int, call: ToolCall) -> None:
        """A tool call starts once the turn's PLAN is on the stream (if one was posted)."""
        if self._plan_posted:
            await self._posts.flushed()

    def after_llm(self, turn: int, message: ChatMessage) -> None:
        """From now on user messages may join the conversation. The first turn of an
        exchange that asks for tools posts PLAN (an interactive or messaged agent; runs
        recorded before PLAN existed replay without it: ``PLAN_PATCH``)."""
        self._turned = True
        opens, self._exchange_opens = self._exchange_opens, False
        self._plan_posted = False
        if not (opens and message.tool_calls and (self.interactive or self._messaged)):
            return
        if workflow.patched(PLAN_PATCH):
            text, details = _plan(self.node_id, turn, message.tool_calls)
            self._posts.say(AgentMessageType.PLAN, text, details, key=f"{self.loop_id}.t{turn}")
            self._plan_posted = True

    def extra_messages(self) -> list[ChatMessage]:
        """The turn boundary: what arrived since the last one."""
        return self._drain()

    def should_stop(self) -> bool:
        """An agent of the main workstream stops with its node, never on its own."""
        return False

    async def after_answer(self, reply: AgentReply) -> list[ChatMessage] | None:
        """Go on with what arrived; else wait (IDLE) when children are awaited or the
        agent is interactive; None ends the node with ``reply``."""
        self._last = reply
        while True:
            if self._has_input():
                self._idle_posted, self._idle_until = False, None
                self._exchange_opens = True
                return self._drain()
            if self.completed:
                self._end("completed on request (COMPLETE)")
                return None
            awaited = self._workstreams.reports.awaited(self.node_id)
            if not awaited and not self.interactive:
                self.listening = False  # in this workflow task: no message is left behind
                return None
            if not await self._wait_idle(awaited):
                seconds = int(self._idle_timeout.total_seconds())
                self._end(f"idle for {seconds} s (idle_timeout_seconds): ended with its answer")
                return None

    async def _wait_idle(self, awaited: list[str]) -> bool:
        """Post IDLE (once per wait) and wait for input; False when the idle time ran out."""
        if not self._idle_posted:
            self._idle_posted = True
            text = f"waiting for {', '.join(awaited)}" if awaited else "waiting for your message"
            details = {"node_id": self.node_id, "waiting_for": awaited}
            self._posts.say(AgentMessageType.IDLE, text, details)

        def woken() -> bool:
            changed = awaited and self._workstreams.reports.awaited(self.node_id) != awaited
            return self._has_input() or self.completed or bool(changed)

        self._awaited = awaited
        self.idle = True
        try:
            if not self.interactive:
                await workflow.wait_condition(woken)
                return True
            if self._idle_until is None:
                self._idle_until = workflow.now() + self._idle_timeout
            left = self._idle_until - workflow.now()
            if left > timedelta(0):
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(woken, timeout=left)
            return woken()
        finally:
            self.idle = False

    def _end(self, why: str) -> None:
        """An interactive agent ends: COMPLETE on its own workstream (its node's id:
        the main workstream's COMPLETE would close the run's conversation)."""
        self.listening = False
        answer = self._last.answer if self._last is not None else ""
        details = {"node_id": self.node_id, "reason": why, "answer": answer[:1000]}
        self._posts.say(
            AgentMessageType.COMPLETE, f"agent '{self.node_id}' {why}", details, self.node_id
        )

    @property
    def awaits_user(self) -> bool:
        """Answered and waits for the next user message (its IDLE names no child):
        what A2A and MCP show as input-required (the ``describe`` query)."""
        return self.idle and self.interactive and self._last is not None and not self._awaited

    # -- continue-as-new ------------------------------------------------------------

    @property
    def resumable(self) -> bool:
        """Idle after an answer: the next generation may take it over."""
        return self.idle and self._last is not None

    def carried(self) -> CarriedAgent | None:
        """The idle session to carry (None when it is not idle)."""
        reply = self._last
        if not self.idle or reply is None:
            return None
        unsent = reply.conversation[reply.stored - reply.base :]
        return CarriedAgent(
            visit=self.visit,
            started_at=self.started_at,
            loop_id=self.loop_id,
            stored=reply.stored,
            turn=reply.last_turn,
            unsent=[m.model_dump(mode="json") for m in unsent],
            answer=reply.answer,
            inbox=list(self._inbox),
            uploads=list(self._uploads),
            seen=list(self._seen),
            idle_until=self._idle_until.isoformat() if self._idle_until else None,
            idle_posted=self._idle_posted,
            completed=self.completed,
        )


def _text_of(user_input: UserInput) -> str:
    return user_input.message or ""


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text.split())
    return text if len(text) <= PLAN_ARGUMENT_CHARS else text[: PLAN_ARGUMENT_CHARS - 1] + "…"


def _plan(node_id: str, turn: int, calls: list[ToolCall]) -> tuple[str, dict[str, Any]]:
    """PLAN's text and details: the planned calls, each with its arguments shortened."""
    tasks = []
    for call in calls:
        arguments = ", ".join(f"{k}={_short(v)}" for k, v in call.arguments.items())
        tasks.append(
            {"name": call.name, "arguments": arguments, "title": f"{call.name}({arguments})"}
        )
    count = f"{len(calls)} tool call" + ("s" if len(calls) > 1 else "")
    text = f"Plan: {count}: " + ", ".join(call.name for call in calls)
    details = {"node_id": node_id, "turn": turn, "tasks": tasks}
    return text, details


def _upload_notice(upload: FileUploaded, reads_files: bool) -> str:
    path = upload.path or upload.name
    notice = (
        f"The user uploaded a file: {upload.name} ({upload.content_type}, {upload.size} "
        f"bytes) at path '{path}' in the run's files."
    )
    if reads_files:
        notice += f" Read it with the {READ_FILE_TOOL} tool (path '{path}')."
    return notice


class AgentSessions:
    """The run's agent sessions: who listens, the updates' checks, what is carried.

    Args:
        run: the run.
        workstreams: the run's children.
        carried: idle sessions of the previous generation, by node id.
        posts: conversation posts made by earlier generations.
    """

    def __init__(
        self,
        run: RunRef,
        workstreams: WorkstreamSupervisor,
        carried: dict[str, CarriedAgent] | None = None,
        posts: int = 0,
    ) -> None:
        self._workstreams = workstreams
        self._carried = dict(carried or {})
        self.posts = ConversationPosts(run, posts)
        self._open: dict[str, AgentSession] = {}  # start order: the latest listens

    @property
    def carried_nodes(self) -> dict[str, CarriedAgent]:
        """Sessions carried from the previous generation, not yet resumed."""
        return dict(self._carried)

    def open(self, execution: NodeExecution) -> AgentSession:
        """The session of an agent node starting (or resuming, if carried)."""
        carried = self._carried.pop(execution.node.id, None)
        session = AgentSession(
            execution, workstreams=self._workstreams, posts=self.posts, carried=carried
        )
        self._open[session.node_id] = session
        return session

    def close(self, session: AgentSession) -> None:
        """The node ended (or stopped): nothing reaches it any more."""
        session.listening = False
        if self._open.get(session.node_id) is session:
            del self._open[session.node_id]

    def idle(self, node_id: str) -> bool:
        """The agent ``node_id`` waits (IDLE) and may be carried."""
        session = self._open.get(node_id)
        return session is not None and session.resumable

    def awaiting_message(self) -> list[str]:
        """The agents that answered and wait for the next user message (``awaits_user``)."""
        return [node_id for node_id, s in self._open.items() if s.awaits_user]

    def listening(self, node_id: str | None = None) -> AgentSession | None:
        """The agent a message goes to: ``node_id``'s, else the latest listening one."""
        if node_id is not None:
            session = self._open.get(node_id)
            return session if session is not None and session.listening else None
        live = [s for s in self._open.values() if s.listening]
        return live[-1] if live else None

    def _resuming(self, node_id: str | None) -> bool:
        """A session carried from the previous generation is not reopened yet: a
        generation's first workflow task runs the handlers of the updates that came
        with it before its nodes restart (tests/integration/test_long_chat.py)."""
        return node_id in self._carried if node_id is not None else bool(self._carried)

    async def resumed(self, node_id: str | None) -> None:
        """Wait until the carried sessions a message may go to are reopened (at once,
        in the generation's first workflow task)."""
        if self._resuming(node_id):
            await workflow.wait_condition(lambda: not self._resuming(node_id))

    def check_message(self, user_input: UserInput) -> AgentSession | None:
        """The listening agent for ``user_input`` (None: one is being resumed, the
        handler checks again); raises ``NotWaiting`` (409) naming why."""
        if self.listening(user_input.node_id) is None and self._resuming(user_input.node_id):
            return None
        return self._listener(user_input)

    def _listener(self, user_input: UserInput) -> AgentSession:
        session = self.listening(user_input.node_id)
        if session is None:
            why = (
                f"agent '{user_input.node_id}' of the main workstream is not listening"
                if user_input.node_id
                else "no agent of the main workstream is listening"
            )
            raise to_application_error(
                NotWaiting(
                    f"{why} and no prompt waits: the message was not taken",
                    context={"listening": [], "running_agents": list(self._open)},
                )
            )
        session.check_message(user_input)
        return session

    def take_message(self, user_input: UserInput) -> SignalAck:
        """Give the message to the listening agent (``check_message`` ran first, and
        ``resumed``)."""
        return self._listener(user_input).take(user_input)

    def file_uploaded(self, upload: FileUploaded) -> None:
        """Post SYSTEM naming the file; the listening agent hears of it."""
        details = upload.model_dump(mode="json")
        text = f"file uploaded: {upload.name} ({upload.content_type}, {upload.size} bytes)"
        self.posts.say(AgentMessageType.SYSTEM, text, details)
        session = self.listening()
        if session is not None:
            session.told(upload)

    def _interactive(self, node_id: str | None) -> AgentSession:
        session = self.listening(node_id)
        if session is None or not session.interactive:
            raise to_application_error(
                NotWaiting(
                    "no interactive agent of the main workstream is listening: nothing to complete",
                    context={"running_agents": list(self._open)},
                )
            )
        return session

    def check_complete(self, request: CompleteAgent) -> None:
        """Refuse COMPLETE when no interactive agent listens (409)."""
        self._interactive(request.node_id)

    def complete(self, request: CompleteAgent) -> CompleteAck:
        """End the listening interactive agent with its last answer; the graph goes on."""
        session = self._interactive(request.node_id)
        session.complete()
        return CompleteAck(node_id=session.node_id, message=f"agent '{session.node_id}' completes")

    def carried(self) -> dict[str, CarriedAgent]:
        """The idle sessions to hand to the next generation."""
        out = {}
        for node_id, session in self._open.items():
            record = session.carried()
            if record is not None:
                out[node_id] = record
        return out
