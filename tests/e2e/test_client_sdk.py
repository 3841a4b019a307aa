"""The Python client SDK against the real gateway of the e2e stack.

What a user of ``spindle.client`` relies on: a run started, streamed and
answered through the SDK (async and sync), each message once and in order
even when messages arrive exactly between the two phases of the stream, files
uploaded, workstreams launched and steered, errors typed.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import jwt
import pytest

from spindle.client import (
    AgentMessageType,
    AsyncSpindleClient,
    ClientConfig,
    ConflictError,
    NotFoundError,
    RunBundle,
    SpindleClient,
    StreamedMessage,
    UnauthorizedError,
    ValidationError,
)
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import create_compact_message
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import (
    E2E_JWT_AUDIENCE,
    E2E_JWT_ISSUER,
    E2E_JWT_SECRET,
    Caller,
    SpindleStack,
)
from tests.polling import eventually

pytestmark = pytest.mark.e2e

T = AgentMessageType
WAIT = 30.0
# A whole run read through the SDK; a lost message would otherwise hang the test.
STREAM_DEADLINE = 60.0


def sdk_config(stack: SpindleStack, caller: Caller) -> ClientConfig:
    return ClientConfig(base_url=stack.base_url, api_key=caller.key)


@pytest.fixture
async def client(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> AsyncIterator[AsyncSpindleClient]:
    async with AsyncSpindleClient(sdk_config(stack, callers["alice"])) as made:
        yield made


@pytest.fixture
async def bus(e2e_settings: Settings) -> AsyncIterator[MessageBus]:
    made = MessageBus.from_settings(e2e_settings)
    yield made
    await made.close()


async def stored_seqs(bus: MessageBus, workflow_id: str) -> dict[int, int]:
    """ts → seq of every message the run's stream stored."""
    return {m.ts: m.seq for m in await bus.history(workflow_id)}


async def test_two_phase_handoff_loses_and_doubles_nothing_between_the_phases(
    client: AsyncSpindleClient, bus: MessageBus
) -> None:
    run = await client.start_run("approval-flow", input={"topic": "handoff"})
    injected: dict[int, str] = {}

    async def between_phases(history: list[StreamedMessage]) -> None:
        # The run's own prompt and five more messages land after phase 1 read
        # the history and before phase 2 connects.
        async def prompt_stored() -> bool:
            stored = await bus.history(run.workflow_id)
            return any(b'"t":9' in m.raw for m in stored)

        await eventually(prompt_stored, what="the prompt is stored", timeout=WAIT)
        for k in range(5):
            text = f"between the phases #{k}"
            posted = await bus.post(
                run.workflow_id, create_compact_message(T.UPDATE, text, details={"k": k})
            )
            injected[posted.seq] = text
        assert all(m.ts is not None for m in history)

    seen: list[StreamedMessage] = []
    stream = await client.stream(run, after_history=between_phases)
    async with asyncio.timeout(STREAM_DEADLINE):
        async for item in stream:
            seen.append(item)
            if item.type is T.REQUEST_INPUT:
                await client.send_input(run, data={"decision": "approve"})

    seqs = await stored_seqs(bus, run.workflow_id)
    assert [seqs[m.ts] for m in seen if m.ts is not None] == list(range(1, len(seqs) + 1)), (
        "every stored message once, in order"
    )
    assert len(seen) == len(seqs)
    live = {m.seq: m.text for m in seen if not m.replayed}
    assert {seq: live.get(seq) for seq in injected} == injected
    assert all(m.seq == seqs[m.ts] for m in seen if m.seq is not None and m.ts is not None)
    assert [m.type for m in seen].count(T.REQUEST_INPUT) == 1
    assert seen[-1].type is T.COMPLETE and seen[-1].details["status"] == "completed"
    assert stream.ended and stream.connections == 1 and stream.reconnects.delays == []


async def test_async_client_runs_the_approval_flow_and_reports_typed_errors(
    client: AsyncSpindleClient, tmp_path: Path
) -> None:
    run = await client.start_run("approval-flow", input={"topic": f"sdk {uuid.uuid4().hex[:6]}"})
    kinds: list[AgentMessageType] = []
    async with asyncio.timeout(STREAM_DEADLINE):
        async for item in await client.stream(run.workflow_id):
            kinds.append(item.message.type)
            assert item.message.workflow_run_id == run.run_id
            if item.type is T.REQUEST_INPUT:
                schema = item.details["ui_schema"]
                assert schema["properties"]["decision"]["enum"] == ["approve", "reject"]
                with pytest.raises(ValidationError) as refused:
                    await client.send_input(run, data={"decision": "maybe"})
                assert refused.value.status == 422
                assert any(e.get("field") == "decision" for e in refused.value.errors)
                note = tmp_path / "notes.txt"
                note.write_text("reviewed by the SDK test")
                uploaded = await client.upload_file(run, note)
                assert (uploaded.name, uploaded.size) == ("notes.txt", note.stat().st_size)
                assert [f.name for f in await client.list_files(run)] == ["notes.txt"]
                assert await client.download_file(run, "notes.txt") == note.read_bytes()
                token = await client.stream_token(run)
                assert token.access_token and run.workflow_id in token.stream_url
                ack = await client.send_input(
                    run, data={"decision": "reject", "comment": "numbers too high"}
                )
                assert ack.status == "accepted"
    assert kinds.count(T.QUESTION) == 1 and kinds[-1] is T.COMPLETE

    described = await client.get_run(run)
    assert described.status == "completed" and described.pending_input is None
    assert described.output["decision"] == "reject"
    listed = await client.list_runs(graph="approval-flow", limit=200)
    assert run.workflow_id in [r.workflow_id for r in listed.runs]
    history = await client.history(run)
    assert [m.type for m in history] == kinds and all(m.replayed for m in history)
    with pytest.raises(ConflictError):
        await client.cancel_run(run)
    with pytest.raises(NotFoundError):
        await client.get_run("run-does-not-exist")
    with pytest.raises(NotFoundError):
        await client.bundle("run-does-not-exist")


def sync_flow(config: ClientConfig) -> tuple[list[StreamedMessage], str, RunBundle]:
    with SpindleClient(config) as client:
        run = client.start_run("approval-flow", input={"topic": "sync"})
        seen: list[StreamedMessage] = []

        def after_history(history: list[StreamedMessage]) -> None:
            # A plain function, free to call the client itself.
            assert history == seen and client.get_run(run).workflow_id == run.workflow_id
            seen.append(
                StreamedMessage.of(create_compact_message(T.IDLE), "", seq=0, replayed=True)
            )

        for item in client.stream(run, after_history=after_history):
            seen.append(item)
            if item.type is T.REQUEST_INPUT:
                client.upload_file(run, b"a,b\n1,2\n", name="data.csv")
                client.send_input(run, data={"decision": "approve", "comment": "ok"})
        return seen, client.get_run(run).status, client.bundle(run)


async def test_sync_client_runs_the_approval_flow(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    seen, status, bundle = await asyncio.to_thread(sync_flow, sdk_config(stack, callers["alice"]))
    marks = [n for n, m in enumerate(seen) if m.seq == 0]
    assert len(marks) == 1, "the hook ran once, between the phases"
    assert all(m.replayed for m in seen[: marks[0]])
    assert not any(m.replayed for m in seen[marks[0] + 1 :])
    seen = [m for m in seen if m.seq != 0]
    kinds = [m.type for m in seen]
    assert kinds.count(T.REQUEST_INPUT) == 1 and kinds.count(T.QUESTION) == 1
    question = next(m for m in seen if m.type is T.QUESTION)
    assert question.details["user_id"] == "alice"
    assert seen[-1].type is T.COMPLETE and status == "completed"
    assert len({m.ts for m in seen}) == len(seen)
    # The bundle: the run, its messages and its archived node reports, typed.
    assert bundle.run.status == "completed" and len(bundle.messages) == len(seen)
    review = next(r for r in bundle.node_reports if r.node_id == "review")
    assert review.status.value == "SUCCESS" and review.node_type == "prompt"
    assert review.output["payload"]["decision"] == "approve"
    assert len(bundle.history) == 1 and bundle.history[0]["events"]


async def test_sync_stream_can_be_closed_early(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    def first_two() -> list[StreamedMessage]:
        with SpindleClient(sdk_config(stack, callers["alice"])) as client:
            run = client.start_run("approval-flow", input={"topic": "early close"})
            stream = client.stream(run)
            taken = []
            for item in stream:
                taken.append(item)
                if len(taken) == 2:
                    break
            stream.close()  # again: harmless
            client.cancel_run(run)
        with pytest.raises(RuntimeError, match="closed"):
            client.get_run(run)
        return taken

    taken = await asyncio.to_thread(first_two)
    assert len(taken) == 2 and taken[0].ts is not None


async def test_workstreams_are_launched_steered_and_terminated_through_the_sdk(
    client: AsyncSpindleClient,
) -> None:
    run = await client.start_run("approval-flow", input={"topic": "workstreams via sdk"})
    launch_id = ""
    steer_id = ""
    by_child: list[StreamedMessage] = []
    async with asyncio.timeout(STREAM_DEADLINE):
        async for item in await client.stream(run):
            if item.type is T.REQUEST_INPUT and not launch_id:
                ack = await client.launch_workstream(
                    run, "List three risks of the Q3 budget.", interactive=True, label="risks"
                )
                launch_id = ack.launch_id
                assert ack.child_workflow_id == f"{run.workflow_id}.{launch_id}"
                steer = await client.steer_workstream(
                    run, launch_id, "add_instruction", "Cite a figure for each risk."
                )
                steer_id = steer.steer_id
                listed = await client.list_workstreams(run)
                assert [w.launch_id for w in listed.workstreams] == [launch_id]
            if launch_id and item.workstream == launch_id:
                by_child.append(item)
                details = item.details if isinstance(item.details, dict) else {}
                if details.get("steer_id") == steer_id:
                    assert details["status"] == "applied"
                    ended = await client.terminate_workstream(run, launch_id)
                    assert ended.state.value in ("canceling", "canceled")
                    await client.send_input(run, data={"decision": "approve"})
    assert by_child, "the child's messages arrive on the parent's stream, attributed"
    assert all(m.message.workstream_id == launch_id for m in by_child)
    info = await client.get_workstream(run, launch_id)
    assert info.state.value == "canceled"
    with pytest.raises(ConflictError):
        await client.steer_workstream(run, launch_id, "pause_requested")


def readme_programs() -> list[str]:
    """The Python blocks of the docs' Python client page (docs/streaming/python-client.md)."""
    page = Path(__file__).resolve().parents[2] / "docs" / "streaming" / "python-client.md"
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


async def test_the_readme_programs_run_as_they_are(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    programs = readme_programs()
    assert len(programs) == 2
    env = {**os.environ, "SPINDLE_URL": stack.base_url, "SPINDLE_API_KEY": callers["alice"].key}
    outputs = []
    for program in programs:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", program],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.splitlines())
    sync_lines, async_lines = outputs
    assert sync_lines[-1] == "completed"
    assert any(line.startswith("REQUEST_INPUT main ") for line in sync_lines)
    assert any(line.startswith("QUESTION main ") for line in sync_lines)
    headed = [line.split(":")[0] for line in async_lines if line.startswith("[")]
    assert headed[0] == "[main] THOUGHT" and headed[-1] == "[main] COMPLETE"
    assert "[main] ANSWER" in headed


async def test_a_bearer_jwt_authenticates_and_other_tenants_runs_are_not_found(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    def token(tenant: str, user: str) -> str:
        claims = {
            "sub": user,
            "tenant": tenant,
            "iss": E2E_JWT_ISSUER,
            "aud": E2E_JWT_AUDIENCE,
            "exp": int(time.time()) + 120,
        }
        return jwt.encode(claims, E2E_JWT_SECRET, "HS256")

    alice = ClientConfig(
        base_url=stack.base_url, bearer_token=token(callers["alice"].tenant, "alice")
    )
    eve = ClientConfig(
        base_url=stack.base_url, bearer_token=token(callers["mallory"].tenant, "eve")
    )
    async with AsyncSpindleClient(alice) as mine, AsyncSpindleClient(eve) as theirs:
        run = await mine.start_run("approval-flow", input={"topic": "jwt"})
        assert (await mine.get_run(run)).tenant_id == callers["alice"].tenant
        with pytest.raises(NotFoundError):
            await theirs.get_run(run)
        with pytest.raises(NotFoundError):
            await (await theirs.stream(run)).messages().__anext__()
        await mine.cancel_run(run)
    async with AsyncSpindleClient(ClientConfig(base_url=stack.base_url)) as nobody:
        with pytest.raises(UnauthorizedError):
            await nobody.list_runs()
