"""``spindle chat`` and ``spindle runs list|describe|cancel`` driven as a user
would: in a pseudo-terminal (pexpect), typing answers at the prompt, against
the real gateway of the e2e stack."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
from collections.abc import AsyncIterator, Iterator

import pexpect
import pytest

from spindle.cli.chat.view import STYLES
from spindle.client import AsyncSpindleClient, ClientConfig
from spindle.dev.processes import bin_path
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import create_compact_message
from spindle.shared.platform.settings import Settings
from tests.cli_runner import run_spindle
from tests.e2e.conftest import Caller, SpindleStack
from tests.polling import eventually
from tests.unit.test_client_terminal_view import screen

pytestmark = pytest.mark.e2e

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.fixture
def user_env(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> dict[str, str]:
    """The environment of a user whose gateway and key come from SPINDLE_URL/SPINDLE_API_KEY."""
    return {
        **os.environ,
        "SPINDLE_URL": stack.base_url,
        "SPINDLE_API_KEY": callers["alice"].key,
        "TERM": "xterm-256color",
    }


@pytest.fixture
def terminal(user_env: dict[str, str]) -> Iterator[list[pexpect.spawn]]:
    """Spawned terminals, closed after the test."""
    spawned: list[pexpect.spawn] = []
    yield spawned
    for child in spawned:
        child.close(force=True)


def spawn(spawned: list[pexpect.spawn], env: dict[str, str], *args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        bin_path("spindle"),
        list(args),
        env=env,
        encoding="utf-8",
        timeout=45,
        dimensions=(40, 120),
    )
    spawned.append(child)
    return child


def spindle(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``spindle ARGS`` without a terminal (pipes), as a script would run it."""
    return run_spindle(*args, environ=env, stdin=stdin)


@pytest.fixture
async def bus(e2e_settings: Settings) -> AsyncIterator[MessageBus]:
    made = MessageBus.from_settings(e2e_settings)
    yield made
    await made.close()


async def test_chat_prompts_from_the_ui_schema_and_completes(
    terminal: list[pexpect.spawn], user_env: dict[str, str], bus: MessageBus
) -> None:
    await asyncio.to_thread(chat_session, terminal, user_env, bus, asyncio.get_running_loop())


def chat_session(
    terminal: list[pexpect.spawn],
    user_env: dict[str, str],
    bus: MessageBus,
    loop: asyncio.AbstractEventLoop,
) -> None:
    chat = spawn(terminal, user_env, "chat", "approval-flow", "--input", '{"topic": "Q3 pty"}')
    transcript = io.StringIO()
    chat.logfile_read = transcript
    chat.expect(r"run (run-[0-9a-zA-Z-]+) \(approval-flow\)")
    workflow_id = chat.match.group(1)
    chat.expect("UPDATE")  # the draft node at work
    chat.expect("INPUT")
    chat.expect_exact("Approve or reject the draft")
    chat.expect_exact("Decision [required] (1 approve, 2 reject): ")
    # An LLM turn streams on the run's stream (as a worker posts it) while the user types.
    for message in [
        create_compact_message(T.STREAMING_CHUNK, "The bud", activity_id="llm.1"),
        create_compact_message(
            T.STREAMING_CHUNK, "get looks fine", activity_id="llm.1", final=True
        ),
        create_compact_message(T.ANSWER, "The budget looks fine.", activity_id="llm.1"),
    ]:
        posted = asyncio.run_coroutine_threadsafe(bus.post(workflow_id, message), loop)
        assert not posted.result(timeout=10).closed
    chat.sendline("maybe")
    chat.expect_exact("choose one of: approve, reject")
    chat.expect_exact("Decision [required] (1 approve, 2 reject): ")
    chat.sendline("1")
    chat.expect_exact("Comment: ")
    chat.sendline("ship it")
    chat.expect_exact("The bud▌")  # tokens shown as they stream ...
    chat.expect_exact("The budget looks fine▌")  # ... appended in place
    chat.expect("ANSWER")
    chat.expect("YOU")
    chat.expect_exact('{"decision":"approve","comment":"ship it"}')
    chat.expect("COMPLETE")
    chat.expect(r"\(completed\)")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0
    shown = [line.rstrip("\r") for line in screen(transcript.getvalue())]
    assert "Traceback" not in transcript.getvalue()
    # On screen, the final answer replaced the streamed text: no chunk row is left.
    assert "ANSWER     The budget looks fine." in shown
    assert not any("▌" in line for line in shown)
    streamed = shown.index("ANSWER     The budget looks fine.")
    you = next(n for n, line in enumerate(shown) if line.startswith("YOU"))
    # COMPLETE comes last; a long final line wraps at word boundaries under its indent.
    complete = max(n for n, line in enumerate(shown) if line.startswith("COMPLETE"))
    assert streamed < you < complete
    assert all(line.startswith(" ") for line in shown[complete + 1 : -1]), shown[complete:]

    listed = spindle(user_env, "runs", "list", "--graph", "approval-flow", "--limit", "200")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(workflow_id))
    assert row.split()[1:3] == ["completed", "approval-flow"]

    described = spindle(user_env, "runs", "describe", workflow_id)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert f"workflow  {workflow_id}" in lines and "status    completed" in lines
    assert any(line.startswith("review (prompt)") and "SUCCESS" in line for line in lines)
    assert "approve" in next(line for line in lines if line.startswith("output"))

    refused = spindle(user_env, "runs", "cancel", workflow_id)
    assert refused.returncode == 1
    assert refused.stderr.startswith("spindle: error: ") and "already finished" in refused.stderr


def test_chat_without_a_terminal_prints_plain_text(user_env: dict[str, str]) -> None:
    done = spindle(
        user_env, "chat", "approval-flow", "--input", '{"topic": "piped"}', stdin="reject\n\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b[" not in done.stdout, "no colours or cursor moves without a TTY"
    lines = done.stdout.splitlines()
    assert any(line.startswith("INPUT") for line in lines)
    assert any(line.startswith("YOU") and '"decision":"reject"' in line for line in lines)
    assert lines[-1].startswith("COMPLETE") and lines[-1].endswith("(completed)")


def test_chat_exits_with_an_error_when_the_input_ends(user_env: dict[str, str]) -> None:
    done = spindle(user_env, "chat", "approval-flow", "--input", '{"topic": "eof"}', stdin="")
    assert done.returncode == 1
    assert "spindle: error:" in done.stderr and "spindle runs cancel run-" in done.stderr


def test_chat_refuses_bad_input_json_and_unknown_graphs(user_env: dict[str, str]) -> None:
    bad = spindle(user_env, "chat", "approval-flow", "--input", "{nope")
    assert bad.returncode == 1 and "--input is not valid JSON" in bad.stderr
    unknown = spindle(user_env, "chat", "no-such-graph", "--input", "{}")
    assert unknown.returncode == 1 and "no-such-graph" in unknown.stderr
    anonymous = spindle({**user_env, "SPINDLE_API_KEY": ""}, "runs", "list")
    assert anonymous.returncode == 1
    assert anonymous.stderr.startswith("spindle: error: credentials required")


async def test_runs_cancel_stops_a_running_run(
    stack: SpindleStack, callers: dict[str, Caller], user_env: dict[str, str]
) -> None:
    async with AsyncSpindleClient(
        ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    ) as client:
        run = await client.start_run("approval-flow", input={"topic": "to cancel"})
        cancelled = await asyncio.to_thread(
            spindle, user_env, "runs", "cancel", run.workflow_id, "--reason", "not needed"
        )
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == f"{run.workflow_id}: cancellation requested"

        async def canceled() -> bool:
            return (await client.get_run(run)).status == "canceled"

        await eventually(canceled, what="the run is canceled", timeout=30)
        kinds = [m.type.name for m in await client.history(run)]
        assert kinds[-1] == "TERMINATED"


async def test_chat_attaches_to_a_waiting_run_and_answers_its_prompt(
    stack: SpindleStack, callers: dict[str, Caller], user_env: dict[str, str]
) -> None:
    async with AsyncSpindleClient(
        ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    ) as client:
        run = await client.start_run("approval-flow", input={"topic": "attach"})

        async def paused() -> bool:
            return (await client.get_run(run)).status == "paused"

        await eventually(paused, what="the run waits for its prompt", timeout=30)
        done = await asyncio.to_thread(
            spindle, user_env, "chat", "--attach", run.workflow_id, stdin="2\nnot now\n"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(f"run {run.workflow_id} (approval-flow)")
        # The prompt came from the history, and the run still waited on it: asked once.
        assert sum(line.startswith("Decision [required]") for line in lines) == 1
        assert any(line.startswith("YOU") and '"decision":"reject"' in line for line in lines)
        assert (await client.get_run(run)).output["comment"] == "not now"

        # Attaching to the finished run replays its conversation and asks nothing.
        again = await asyncio.to_thread(spindle, user_env, "chat", "--attach", run.workflow_id)
        assert again.returncode == 0, again.stdout + again.stderr
        replayed = again.stdout.splitlines()
        assert not any(line.startswith("Decision") for line in replayed)
        labels = [line.split()[0] for line in replayed[1:] if line[:1].isupper()]
        assert labels == [STYLES[m.type][0] for m in await client.history(run)]
        assert labels[-1] == "COMPLETE"


def test_ctrl_c_at_a_prompt_detaches_and_the_run_goes_on(
    terminal: list[pexpect.spawn], user_env: dict[str, str]
) -> None:
    chat = spawn(terminal, user_env, "chat", "approval-flow", "--input", '{"topic": "ctrl-c"}')
    chat.expect(r"run (run-[0-9a-zA-Z-]+) \(approval-flow\)")
    workflow_id = chat.match.group(1)
    chat.expect_exact("Decision [required] (1 approve, 2 reject): ")
    chat.sendintr()
    chat.expect_exact(f"detached; the run goes on (spindle runs cancel {workflow_id})")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 130
    described = spindle(user_env, "runs", "describe", workflow_id)
    assert "status    paused" in described.stdout.splitlines()
    assert spindle(user_env, "runs", "cancel", workflow_id).returncode == 0


async def test_chat_holds_a_conversation_with_an_interactive_agent(
    terminal: list[pexpect.spawn], user_env: dict[str, str]
) -> None:
    await asyncio.to_thread(conversation_in_a_terminal, terminal, user_env)


def conversation_in_a_terminal(terminal: list[pexpect.spawn], user_env: dict[str, str]) -> None:
    """The ``chat`` example: three messages typed at its IDLE, each answered, then /done."""
    chat = spawn(terminal, user_env, "chat", "chat", "--input", '{"message": "what is 2 + 2"}')
    transcript = io.StringIO()
    chat.logfile_read = transcript
    chat.expect(r"run (run-[0-9a-zA-Z-]+) \(chat\)")
    chat.expect_exact("2 + 2 = 4")
    for question, answer in [
        ("what is 3 * 3", "3 * 3 = 9"),
        ("and 10 - 4", "10 - 4 = 6"),
        ("thanks, what is 7 + 1", "7 + 1 = 8"),
    ]:
        chat.expect_exact("you> ")
        chat.sendline(question)
        chat.expect_exact(answer)
    chat.expect_exact("you> ")
    chat.sendline("/done")
    chat.expect("COMPLETE")
    chat.expect(r"\(completed\)")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0, transcript.getvalue()[-2000:]
    shown = [line.rstrip("\r") for line in screen(transcript.getvalue())]
    assert "Traceback" not in transcript.getvalue()
    you = [line for line in shown if line.startswith("YOU")]
    assert [line.split(None, 1)[1] for line in you] == [
        "what is 3 * 3",
        "and 10 - 4",
        "thanks, what is 7 + 1",
    ]


def test_chat_sends_piped_lines_to_an_idle_agent(user_env: dict[str, str]) -> None:
    done = spindle(
        user_env, "chat", "chat", "--input", '{"message": "hi"}', stdin="what is 6 * 7\n/done\n"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("YOU") and "what is 6 * 7" in line for line in lines)
    assert any("6 * 7 = 42" in line for line in lines)
    # The run's COMPLETE (its output may span lines) is the last message.
    assert any(line.startswith("COMPLETE") for line in lines)
    assert lines[-1].endswith("(completed)")
