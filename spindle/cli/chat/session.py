"""One ``spindle chat`` conversation: start or attach, stream, render, answer prompts,
and talk to an interactive agent: at its IDLE the next line typed is sent as a user
message; ``/done`` completes the agent (docs/conversations.md, docs/operations/cli.md)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from spindle.cli.chat.form import MESSAGE_FIELD, ask, form_fields
from spindle.cli.chat.view import ChatView
from spindle.cli.terminal_output import TerminalOutput
from spindle.client import (
    AsyncSpindleClient,
    ClientConfig,
    ConflictError,
    RunRef,
    StreamedMessage,
    ValidationError,
)
from spindle.shared.contracts.errors import SpindleError
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType

T = AgentMessageType
R = TypeVar("R")


class InputEnded(SpindleError):
    """The terminal's input ended while a prompt waited for an answer."""

    title = "Input ended"


# How often the deadline bars of running workstreams are refreshed.
WORKSTREAM_POLL_SECONDS = 1.0
# At an idle agent: what the user types to end it (COMPLETE), and the prompt.
DONE_COMMAND = "/done"
MESSAGE_PROMPT = "you> "


def waits_for_the_user(item: StreamedMessage) -> bool:
    """The main workstream's IDLE of an agent waiting for a message (not for children)."""
    details = item.details if isinstance(item.details, dict) else {}
    return (
        item.type is T.IDLE
        and item.workstream == MAIN_WORKSTREAM
        and not details.get("waiting_for")
    )


class ChatSession:
    """One conversation: start or attach, stream, render, answer prompts.

    Args:
        config: the gateway and credentials.
        output: where to render.
        read: asks a line of the user (``input``), run in a worker thread.
    """

    def __init__(
        self, config: ClientConfig, output: TerminalOutput, *, read: Callable[[str], str]
    ) -> None:
        self.config = config
        self.output = output
        self.view = ChatView(output)
        self.read = read
        self.workflow_id: str | None = None

    async def run(self, graph: str | None, run_input: Any, *, attach: str | None) -> int:
        """Hold the conversation to its end; returns the exit code."""
        async with AsyncSpindleClient(self.config) as client:
            run: RunRef
            if attach is not None:
                run = await client.get_run(attach)
                graph = run.graph_name
            else:
                run = await client.start_run(graph, input=run_input)
            self.workflow_id = run.workflow_id
            self.output.print(
                self.output.paint(f"run {run.workflow_id} ({graph}) · Ctrl-C to detach", "2")
            )
            poller = asyncio.create_task(self._poll_workstreams(client, run))
            last: StreamedMessage | None = None

            async def after_history(history: list[StreamedMessage]) -> None:
                # Attached to an agent that waits: its IDLE is the history's last word.
                main = [m for m in history if m.workstream == MAIN_WORKSTREAM]
                if main and waits_for_the_user(main[-1]):
                    await self._message(client, run)

            try:
                async for item in await client.stream(run, after_history=after_history):
                    self.view.show(item)
                    if item.type is T.REQUEST_INPUT:
                        await self._answer(client, run, item)
                    elif waits_for_the_user(item) and not item.replayed:
                        await self._message(client, run)
                    last = item
            finally:
                poller.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poller
                self.view.close()
        details = last.details if last is not None and isinstance(last.details, dict) else {}
        completed = last is not None and last.type is T.COMPLETE
        return 0 if completed and details.get("status", "completed") == "completed" else 1

    async def _answer(self, client: AsyncSpindleClient, run: RunRef, item: StreamedMessage) -> None:
        details = item.details if isinstance(item.details, dict) else {}
        node_id = details.get("node_id")
        if item.replayed:
            # A prompt from the history may have been answered since: ask the run.
            pending = (await client.get_run(run)).pending_input
            if pending is None or pending.node_id != node_id:
                return
        fields = form_fields(details.get("ui_schema"))
        free_text = len(fields) == 1 and fields[0].name == MESSAGE_FIELD
        self.output.suspend()
        try:
            while True:
                try:
                    answer = await in_daemon_thread(ask, fields, self.read, self.output.write_raw)
                except EOFError:
                    raise InputEnded(
                        f"the input ended before prompt '{node_id}' was answered; the run "
                        f"waits (spindle chat --attach {self.workflow_id}, or "
                        f"spindle runs cancel {self.workflow_id})"
                    ) from None
                try:
                    if free_text:
                        await client.send_input(run, str(answer[MESSAGE_FIELD]), node_id=node_id)
                    else:
                        await client.send_input(run, data=answer, node_id=node_id)
                    return
                except ValidationError as exc:
                    reasons = [
                        f"  {e.get('field')}: {e.get('message') or e.get('rule')}"
                        for e in exc.errors
                    ]
                    self.output.write_raw("\n".join([f"refused: {exc.detail}", *reasons]) + "\n")
                except ConflictError as exc:
                    self.output.write_raw(f"not sent: {exc.detail}\n")
                    return
        finally:
            self.output.resume()

    async def _message(self, client: AsyncSpindleClient, run: RunRef) -> None:
        """Read the user's next message and send it; ``/done`` completes the agent."""
        self.output.suspend()
        try:
            while True:
                try:
                    line = await in_daemon_thread(self.read, MESSAGE_PROMPT)
                except EOFError:
                    raise InputEnded(
                        f"the input ended while the agent waited for a message; it waits "
                        f"(spindle chat --attach {self.workflow_id}, or "
                        f"spindle runs cancel {self.workflow_id})"
                    ) from None
                text = line.strip()
                if not text:
                    continue
                try:
                    if text == DONE_COMMAND:
                        await client.complete(run)
                    else:
                        await client.send_message(run, text)
                    return
                except ConflictError as exc:
                    self.output.write_raw(f"not sent: {exc.detail}\n")
                    return
        finally:
            self.output.resume()

    async def _poll_workstreams(self, client: AsyncSpindleClient, run: RunRef) -> None:
        """Keep the deadline bars of running workstreams current (live terminals only)."""
        if not self.output.live:
            return
        while True:
            await asyncio.sleep(WORKSTREAM_POLL_SECONDS)
            known = self.view.workstreams
            running = [
                ws
                for ws in self.view.seen_workstreams
                if ws not in known or not known[ws].state.finished
            ]
            if not running:
                continue
            with contextlib.suppress(Exception):  # a bar is not worth failing the chat
                listed = await client.list_workstreams(run)
                self.view.show_workstreams(listed.workstreams)


async def in_daemon_thread(call: Callable[..., R], *args: Any) -> R:
    """``call(*args)`` in a daemon thread, awaited.

    Reading the terminal blocks until a line comes; in a daemon thread, Ctrl-C
    at a prompt ends the command at once (``asyncio.to_thread``'s executor
    would be joined at exit, waiting for a line that never comes).
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[R] = loop.create_future()

    def fail(error: BaseException) -> None:
        if not done.done():
            done.set_exception(error)

    def succeed(value: R) -> None:
        if not done.done():
            done.set_result(value)

    def work() -> None:
        try:
            value = call(*args)
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop has closed (Ctrl-C)
                loop.call_soon_threadsafe(fail, exc)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(succeed, value)

    threading.Thread(target=work, name="spindle-chat-input", daemon=True).start()
    return await done
