"""How ``spindle chat`` shows a run's conversation.

Each message type has a label and a colour; a workstream's messages are
prefixed with its id (``[ws-1]``). Text an LLM is still streaming
(STREAMING_CHUNK) grows in place in the live region until its final THOUGHT or
ANSWER replaces it (or a RESTARTING voids it). BATCH_PROGRESS messages fill a
progress bar per batch, and workstreams get a deadline bar (from the run's
workstream list and the 75 %/90 % warnings). Without a TTY the same messages
print as plain lines and chunks are skipped: only final texts appear.
"""

from __future__ import annotations

import textwrap
from typing import Any

import orjson

from spindle.cli.terminal_output import TerminalOutput
from spindle.client.chunks import ChunkEvent, LiveText, TokenAssembler
from spindle.client.models import StreamedMessage
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType
from spindle.shared.contracts.workstreams import WorkstreamInfo

T = AgentMessageType

# type → (label, ANSI style)
STYLES: dict[AgentMessageType, tuple[str, str]] = {
    T.SYSTEM: ("SYSTEM", "2"),
    T.THOUGHT: ("THOUGHT", "35"),
    T.PLAN: ("PLAN", "34"),
    T.UPDATE: ("UPDATE", "36"),
    T.COMPLETE: ("COMPLETE", "1;32"),
    T.WARNING: ("WARNING", "33"),
    T.ERROR: ("ERROR", "1;31"),
    T.ANSWER: ("ANSWER", "1;32"),
    T.QUESTION: ("YOU", "1;34"),
    T.REQUEST_INPUT: ("INPUT", "1;33"),
    T.IDLE: ("IDLE", "2"),
    T.TERMINATED: ("TERMINATED", "1;31"),
    T.STREAMING_CHUNK: ("…", "2"),
    T.BATCH_PROGRESS: ("BATCH", "36"),
    T.RESTARTING: ("RESTARTING", "33"),
}
# update_plan's task statuses (shared.contracts.messages.PlanTask) as checkboxes.
PLAN_MARKS = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}
LABEL_WIDTH = 11
BAR_WIDTH = 20
# Rows of streamed text kept visible in the live region (the tail of the text).
STREAM_ROWS = 6


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """``[#####-----]`` for a fraction in 0..1."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _details(item: StreamedMessage) -> dict[str, Any]:
    return item.details if isinstance(item.details, dict) else {}


def _chunk_block(live: LiveText) -> str:
    return f"chunk:{live.workstream}:{live.activity_id}"


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


class ChatView:
    """Renders messages and workstream states on a ``TerminalOutput``."""

    def __init__(self, output: TerminalOutput) -> None:
        self.output = output
        self.tokens = TokenAssembler()
        self._batches: dict[str, set[int]] = {}
        self.workstreams: dict[str, WorkstreamInfo] = {}
        self.seen_workstreams: set[str] = set()

    # -- messages ---------------------------------------------------------------

    def show(self, item: StreamedMessage) -> None:
        """Render one message of the stream."""
        if item.workstream != MAIN_WORKSTREAM:
            self.seen_workstreams.add(item.workstream)
        update = self.tokens.feed(item)
        if item.type is T.STREAMING_CHUNK:
            if update.live is not None:
                self.output.set_block(_chunk_block(update.live), self._live_rows(update.live))
            return
        if update.event in (ChunkEvent.SUPERSEDED, ChunkEvent.VOIDED) and update.live:
            self.output.set_block(_chunk_block(update.live), None)
        if item.type is T.BATCH_PROGRESS and self._batch(item):
            return
        if item.type is T.WARNING and "pct" in _details(item):
            self._deadline_warning(item)
        if item.type in (T.COMPLETE, T.TERMINATED) and item.workstream != MAIN_WORKSTREAM:
            self.output.set_block(f"ws:{item.workstream}", None)
        self.output.print(self.line(item.workstream, item.type, self._text(item), wrap=True))

    def line(
        self,
        workstream: str,
        kind: AgentMessageType,
        text: str,
        *,
        label: str | None = None,
        wrap: bool = False,
    ) -> str:
        """One message as permanent lines: ``[ws-1] LABEL      text``.

        With ``wrap`` on a TTY, lines longer than the terminal are wrapped at word
        boundaries under the text's indent (the terminal itself would cut words in
        two and lose the indent); without a TTY lines stay whole for pipes and files.
        """
        default, style = STYLES.get(kind, (kind.name, ""))
        label = label or default
        tag = "" if workstream == MAIN_WORKSTREAM else f"[{workstream}] "
        head = self.output.paint(f"{tag}{label:<{LABEL_WIDTH}}", style)
        indent = " " * (len(tag) + LABEL_WIDTH)
        if wrap and self.output.live:
            return head + self._wrapped(text, indent)[len(indent) :]
        body = text.replace("\n", "\n" + indent)
        return f"{head}{body}"

    def _wrapped(self, text: str, indent: str) -> str:
        """``text`` wrapped at word boundaries to the terminal's width, every row
        starting with ``indent``; a word longer than a row is still cut."""
        width = max(len(indent) + 20, self.output.width() - 1)
        rows: list[str] = []
        for paragraph in text.split("\n"):
            rows += textwrap.wrap(
                paragraph,
                width=width,
                initial_indent=indent,
                subsequent_indent=indent,
                break_on_hyphens=False,
            ) or [indent]
        return "\n".join(rows)

    def _text(self, item: StreamedMessage) -> str:
        details = _details(item)
        if item.type is T.REQUEST_INPUT:
            return str(details.get("prompt") or item.text or "input requested")
        if item.type is T.COMPLETE:
            status = details.get("status")
            text = item.text or ""
            return f"{text} ({status})".strip() if status else text or "done"
        if item.type is T.PLAN:
            return self._plan(item)
        if item.type is T.BATCH_PROGRESS:
            size = int(details.get("batch_size") or 1)
            done = len(self._batches.get(self._batch_key(item), ()))
            return f"{bar(done / size)} {item.text}"
        if item.text:
            return item.text
        return _json(item.details) if item.details is not None else ""

    def _plan(self, item: StreamedMessage) -> str:
        """A plan's tasks: a checklist (``[x]`` done, ``[~]`` in progress, ``[ ]`` to do)
        when they carry a status (``update_plan``), else a numbered list."""
        details = _details(item)
        tasks = details.get("tasks") or details.get("plan") or details.get("steps")
        lines = [item.text] if item.text else []
        if isinstance(tasks, list):
            checklist = any(isinstance(task, dict) and task.get("status") for task in tasks)
            for n, task in enumerate(tasks, 1):
                name = task
                status = ""
                if isinstance(task, dict):
                    name = task.get("title") or task.get("name") or _json(task)
                    status = str(task.get("status") or "")
                mark = PLAN_MARKS.get(status, "[ ]") if checklist else f"{n}."
                lines.append(f"{mark} {name}")
        return "\n".join(lines)

    def _live_rows(self, live: LiveText) -> list[str]:
        label, style = STYLES[T.STREAMING_CHUNK]
        tag = "" if live.workstream == MAIN_WORKSTREAM else f"[{live.workstream}] "
        head = f"{tag}{label:<{LABEL_WIDTH}}"
        width = max(20, self.output.width() - 1)
        indent = " " * len(head)
        rows: list[str] = []
        for n, paragraph in enumerate((live.text + "▌").split("\n")):
            rows += textwrap.wrap(
                paragraph,
                width=width,
                initial_indent=head if n == 0 else indent,
                subsequent_indent=indent,
                drop_whitespace=False,
            ) or [indent]
        return [self.output.paint(row, style) for row in rows[-STREAM_ROWS:]]

    # -- progress bars ------------------------------------------------------------

    @staticmethod
    def _batch_key(item: StreamedMessage) -> str:
        details = _details(item)
        return f"{item.workstream}:{details.get('node_id')}:{details.get('turn')}"

    def _batch(self, item: StreamedMessage) -> bool:
        """Count a batch's progress; True when the live bar shows it (nothing to print)."""
        details = _details(item)
        key = self._batch_key(item)
        done = self._batches.setdefault(key, set())
        done.add(int(details.get("batch_index") or len(done) + 1))
        size = int(details.get("batch_size") or 1)
        if not self.output.live or len(done) >= size:
            self.output.set_block(f"batch:{key}", None)
            return False
        row = self.line(item.workstream, T.BATCH_PROGRESS, f"{bar(len(done) / size)} {item.text}")
        self.output.set_block(f"batch:{key}", [row])
        return True

    def _deadline_warning(self, item: StreamedMessage) -> None:
        details = _details(item)
        launch_id = str(details.get("launch_id") or item.workstream)
        known = self.workstreams.get(launch_id)
        if known is not None:
            known = known.model_copy(update={"deadline_used_pct": float(details["pct"])})
            self.show_workstreams([known])

    def show_workstreams(self, infos: list[WorkstreamInfo]) -> None:
        """Draw (or remove, once finished) each workstream's deadline bar."""
        for info in infos:
            self.workstreams[info.launch_id] = info
            key = f"ws:{info.launch_id}"
            if info.state.finished:
                self.output.set_block(key, None)
                continue
            phase = info.phase.value + (f" ({info.tool})" if info.tool else "")
            pct = info.deadline_used_pct
            text = f"{bar(pct / 100)} {pct:3.0f}% {info.state.value}, {phase}"
            row = self.line(info.launch_id, T.UPDATE, text, label="DEADLINE")
            self.output.set_block(key, [row])

    def close(self) -> None:
        self.output.close()
