"""The terminal client's rendering and prompt forms, on an in-memory terminal:
labels and workstream tags, streamed text growing in place and replaced by the
final answer, progress bars, plain output without a TTY, fields from a uiSchema."""

from __future__ import annotations

import io
import re

import pytest

from spindle.cli.chat.form import MESSAGE_FIELD, ask, form_fields
from spindle.cli.chat.view import ChatView, bar
from spindle.cli.terminal_output import TerminalOutput, visible
from spindle.client import StreamedMessage
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import create_compact_message
from spindle.shared.contracts.workstreams import WorkstreamInfo

pytestmark = pytest.mark.unit

ERASE = re.compile(r"\r(\x1b\[\d+A)?\x1b\[J")


def message(t: T, text: str | None = None, **kw: object) -> StreamedMessage:
    compact = create_compact_message(t, text, **kw)  # type: ignore[arg-type]
    return StreamedMessage.of(compact, "r", seq=None, replayed=False)


def view(*, live: bool, width: int = 80) -> tuple[ChatView, io.StringIO]:
    out = io.StringIO()
    return ChatView(TerminalOutput(out, live=live, color=live, width=lambda: width)), out


def screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: apply the live region's erases."""
    lines: list[str] = [""]
    for piece in re.split(r"(\r(?:\x1b\[\d+A)?\x1b\[J|\n)", raw):
        if piece == "\n":
            lines.append("")
        elif piece and ERASE.fullmatch(piece):
            up = re.search(r"\[(\d+)A", piece)
            del lines[len(lines) - 1 - (int(up.group(1)) if up else 0) :]
            lines.append("")
        elif piece:
            lines[-1] += visible(piece)
    return lines


def test_types_are_labelled_and_workstreams_tagged() -> None:
    chat, out = view(live=False)
    chat.show(message(T.UPDATE, "Using tool search_notes"))
    chat.show(message(T.ANSWER, "line one\nline two", workstream_id="ws-1"))
    chat.show(message(T.COMPLETE, "done", details={"status": "completed"}))
    assert out.getvalue().splitlines() == [
        "UPDATE     Using tool search_notes",
        "[ws-1] ANSWER     line one",
        "                  line two",
        "COMPLETE   done (completed)",
    ]


def test_colours_only_on_a_terminal() -> None:
    chat, out = view(live=True)
    chat.show(message(T.ERROR, "boom"))
    assert "\x1b[1;31mERROR" in out.getvalue()
    plain, plain_out = view(live=False)
    plain.show(message(T.ERROR, "boom"))
    assert "\x1b[" not in plain_out.getvalue()


def test_streamed_tokens_grow_in_place_then_the_final_answer_replaces_them() -> None:
    chat, out = view(live=True)
    chat.show(message(T.UPDATE, "thinking about it"))
    chat.show(message(T.STREAMING_CHUNK, "The answer", activity_id="a1"))
    assert screen(out.getvalue())[-1].endswith("The answer▌")
    chat.show(message(T.STREAMING_CHUNK, " is 42", activity_id="a1", final=True))
    shown = screen(out.getvalue())
    assert shown[-1].endswith("The answer is 42▌")
    assert sum("The answer" in line for line in shown) == 1, "appended in place, not repeated"
    chat.show(message(T.ANSWER, "The answer is 42.", activity_id="a1"))
    chat.close()
    assert screen(out.getvalue()) == [
        "UPDATE     thinking about it",
        "ANSWER     The answer is 42.",
        "",
    ]


def test_a_restart_voids_the_streamed_text() -> None:
    chat, out = view(live=True)
    chat.show(message(T.STREAMING_CHUNK, "garbled hal", activity_id="a1"))
    chat.show(message(T.RESTARTING, "retrying llm (attempt 2)", activity_id="a1"))
    chat.show(message(T.STREAMING_CHUNK, "clean", activity_id="a1"))
    shown = screen(out.getvalue())
    assert not any("garbled" in line for line in shown)
    assert shown[0] == "RESTARTING retrying llm (attempt 2)" and shown[-1].endswith("clean▌")


def test_chunks_are_skipped_without_a_terminal() -> None:
    chat, out = view(live=False)
    chat.show(message(T.STREAMING_CHUNK, "partial", activity_id="a1"))
    chat.show(message(T.ANSWER, "final", activity_id="a1"))
    assert out.getvalue() == "ANSWER     final\n"


def test_batch_progress_fills_a_bar_until_the_batch_is_done() -> None:
    chat, out = view(live=True)

    def progress(index: int) -> StreamedMessage:
        details = {"node_id": "n", "turn": 1, "batch_index": index, "batch_size": 3}
        return message(T.BATCH_PROGRESS, f"tool {index} of 3 done", details=details)

    chat.show(progress(2))
    assert screen(out.getvalue())[-1] == f"BATCH      {bar(1 / 3)} tool 2 of 3 done"
    chat.show(progress(1))
    chat.show(progress(3))
    chat.close()
    assert screen(out.getvalue()) == [f"BATCH      {bar(1.0)} tool 3 of 3 done", ""]
    plain, plain_out = view(live=False)
    plain.show(progress(1))
    assert plain_out.getvalue() == f"BATCH      {bar(1 / 3)} tool 1 of 3 done\n"


def workstream(pct: float, state: str = "running") -> WorkstreamInfo:
    return WorkstreamInfo(
        launch_id="ws-1",
        workstream_id="ws-1",
        child_workflow_id="r.ws-1",
        task="t",
        interactive=False,
        state=state,  # type: ignore[arg-type]
        phase="executing_tool",  # type: ignore[arg-type]
        tool="search_notes",
        started_at="2026-01-01T00:00:00+00:00",
        deadline_seconds=120,
        elapsed_seconds=pct * 1.2,
        deadline_used_pct=pct,
    )


def test_workstream_deadline_bars_follow_the_list_and_the_warnings() -> None:
    chat, out = view(live=True, width=100)
    chat.show_workstreams([workstream(40.0)])
    assert screen(out.getvalue())[-1] == (
        f"[ws-1] DEADLINE   {bar(0.4)}  40% running, executing_tool (search_notes)"
    )
    chat.show(message(T.WARNING, "75% used", details={"launch_id": "ws-1", "pct": 75}))
    shown = screen(out.getvalue())
    assert shown[0] == "WARNING    75% used" and " 75% running" in shown[-1]
    chat.show_workstreams([workstream(100.0, "completed")])
    assert screen(out.getvalue()) == ["WARNING    75% used", ""]
    narrow, narrow_out = view(live=True, width=60)
    narrow.show_workstreams([workstream(40.0)])
    row = screen(narrow_out.getvalue())[-1]
    assert len(row) == 59 and row.endswith("…"), "a live row never wraps"


def test_final_lines_wrap_at_word_boundaries_on_a_tty() -> None:
    words = "the quick brown fox jumps over the lazy dog while Spindle keeps its runs durable"
    chat, out = view(live=True, width=40)
    chat.show(message(T.ANSWER, f"{words}\nsecond", workstream_id="ws-1"))
    shown = [row for row in screen(out.getvalue()) if row]
    indent = " " * len("[ws-1] ANSWER     ")
    assert shown[0].startswith("[ws-1] ANSWER     the quick")
    assert all(len(row) <= 39 for row in shown), shown
    assert all(row.startswith(indent) for row in shown[1:]), "continuations keep the indent"
    # Every word arrives whole: the rows' words are the text's words, in order.
    assert " ".join(" ".join(shown).split()[2:]) == f"{words} second"
    assert shown[-1] == f"{indent}second"
    # Without a TTY a line stays whole (pipes, files).
    plain, plain_out = view(live=False, width=40)
    plain.show(message(T.ANSWER, words))
    assert plain_out.getvalue() == f"ANSWER     {words}\n"


def test_fields_come_from_the_ui_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["approve", "reject"], "title": "Decision"},
            "copies": {"type": "integer", "default": 1},
            "urgent": {"type": "boolean"},
            "tags": {"type": "array"},
            "comment": {"type": "string", "description": "Why?"},
        },
        "required": ["decision", "urgent"],
    }
    fields = form_fields(schema)
    assert [(f.name, f.kind, f.required) for f in fields] == [
        ("decision", "enum", True),
        ("copies", "integer", False),
        ("urgent", "boolean", True),
        ("tags", "json", False),
        ("comment", "string", False),
    ]
    assert fields[0].label() == "Decision [required] (1 approve, 2 reject): "
    answers = iter(["maybe", "2", "many", "", "", "y", "[1, 2]", ""])
    asked: list[str] = []
    said: list[str] = []

    def read(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    answer = ask(fields, read, said.append)
    assert answer == {"decision": "reject", "copies": 1, "urgent": True, "tags": [1, 2]}
    assert said == [
        "  choose one of: approve, reject\n",
        "  a whole number, please\n",
        "  this field is required\n",
        "  Why?\n",
    ]
    assert asked[2] == "copies (integer) [default 1]: "


def test_a_schema_without_properties_asks_for_text() -> None:
    fields = form_fields({"type": "string"})
    assert [(f.name, f.required) for f in fields] == [(MESSAGE_FIELD, True)]
    assert ask(fields, lambda _: "hello", lambda _: None) == {MESSAGE_FIELD: "hello"}
    with pytest.raises(EOFError):

        def ended(_: str) -> str:
            raise EOFError

        ask(fields, ended, lambda _: None)
