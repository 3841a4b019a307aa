"""Graceful shutdown, as Kubernetes does it: SIGTERM to a real process.

- A worker gets SIGTERM while one of its activities (an LLM turn) is running:
  it stops polling but lets the activity finish and report, then exits 0; a
  worker started afterwards carries the run to its end. The node ran once: no
  second attempt, no RESTARTING message.
- A gateway gets SIGTERM while a client watches a live run through it: the
  stream ends at once, cleanly, with a ``retry:`` hint (not after the graceful
  timeout, which is set far longer here), the process exits 0, and the client
  resumes with ``Last-Event-ID`` on another gateway and gets the rest.

The LLM is a fake chat-completions server on loopback that holds a request
until the test releases it, so "mid-activity" is a fact, not a timing guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from temporalio.client import Client

from spindle.dev.processes import ManagedProcess, free_port, python_module
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import REPO_ROOT, _healthy, subprocess_env, wait_for_worker
from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import SseComment, StreamEnded, open_sse
from tests.faults.conftest import approval_graph
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

# Far longer than any wait below: a process that only stopped when its graceful
# timeout ran out would fail these tests rather than pass them late.
GRACE_SECONDS = 90
DRAIN_RETRY_MS = 300
ANSWER = "Drained and done."


@dataclass
class HeldLlm:
    """An OpenAI-compatible chat-completions server whose answers wait for ``release``."""

    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if ":" in line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append(orjson.loads(body))
                self.arrived.set()
                await self.release.wait()
                reply = orjson.dumps(
                    {
                        "id": f"chatcmpl-{len(self.requests)}",
                        "object": "chat.completion",
                        "created": 1_700_000_000,
                        "model": "held-model",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": ANSWER},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
                    }
                )
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(reply), reply)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@dataclass
class DrainStack:
    settings: Settings
    env: dict[str, str]
    llm: HeldLlm
    temporal: Client
    logs: Path
    gateway: ManagedProcess  # the one that stays up

    def worker(self, name: str) -> ManagedProcess:
        return ManagedProcess(
            name,
            python_module("spindle.worker.main"),
            log_path=self.logs / f"{name}.log",
            env=self.env,
            cwd=REPO_ROOT,
        )

    def gateway_on(self, name: str, port: int) -> ManagedProcess:
        return gateway_process(name, port, self.env, self.logs)

    async def start_worker(self, name: str) -> ManagedProcess:
        proc = self.worker(name).start()
        assert proc.pid is not None
        await wait_for_worker(self.temporal, self.settings.task_queue, proc.pid, proc)
        return proc


def gateway_process(name: str, port: int, env: dict[str, str], logs: Path) -> ManagedProcess:
    return ManagedProcess(
        name,
        python_module("spindle.gateway.main"),
        log_path=logs / f"{name}.log",
        env={**env, "SPINDLE_GATEWAY_PORT": str(port)},
        cwd=REPO_ROOT,
        ready=lambda: _healthy(f"http://127.0.0.1:{port}/healthz"),
        ready_timeout=60,
    )


def sigterm(proc: ManagedProcess) -> None:
    """What the kubelet sends a container it stops."""
    assert proc.pid is not None
    os.killpg(proc.pid, signal.SIGTERM)  # the child leads its own process group


async def exit_code(proc: ManagedProcess, timeout: float) -> int | None:
    assert proc.proc is not None
    return await asyncio.to_thread(proc.proc.wait, timeout)


@pytest.fixture(scope="module")
async def drain_stack(
    settings: Settings, temporal_client: Client, artifacts_dir: Path
) -> AsyncIterator[DrainStack]:
    llm = HeldLlm()
    server = await asyncio.start_server(llm.handle, "127.0.0.1", 0)
    llm.port = server.sockets[0].getsockname()[1]
    ours = settings.model_copy(
        update={
            "task_queue": f"spindle-drain-{uuid.uuid4().hex[:6]}",
            "mongo_db": "spindle_drain",
            "gateway_host": "127.0.0.1",
            "gateway_port": free_port(),
            "sse_keepalive_seconds": 1.0,
            "auth_disabled": True,
            "llm_provider": "openai",
        }
    )
    env = {
        **subprocess_env(ours),
        "SPINDLE_OPENAI_BASE_URL": llm.base_url,
        "SPINDLE_OPENAI_API_KEY": "held",
        "SPINDLE_LLM_STREAMING": "false",
        "SPINDLE_WORKER_GRACEFUL_SHUTDOWN_SECONDS": str(GRACE_SECONDS),
        "SPINDLE_GATEWAY_GRACEFUL_SHUTDOWN_SECONDS": str(GRACE_SECONDS),
        "SPINDLE_SSE_SHUTDOWN_RETRY_MS": str(DRAIN_RETRY_MS),
    }
    logs = artifacts_dir / "graceful-shutdown"
    staying = gateway_process("gateway-b", ours.gateway_port, env, logs)
    await asyncio.to_thread(staying.start)
    stack = DrainStack(ours, env, llm, temporal_client, logs, staying)
    try:
        yield stack
    finally:
        stack.gateway.stop()
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()


def http_client(port: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(30.0, connect=5.0)
    )


def one_agent_graph() -> dict[str, Any]:
    """One LLM turn (one activity), then the output node."""
    return {
        "name": f"drain-{uuid.uuid4().hex[:8]}",
        "entry": "think",
        "nodes": [
            {"id": "think", "type": "agent", "params": {"prompt": "{{ input.question }}"}},
            {"id": "result", "type": "output", "params": {"select": "think"}},
        ],
        "edges": [{"from": "think", "to": "result"}],
    }


async def test_sigterm_mid_activity_lets_the_activity_finish(drain_stack: DrainStack) -> None:
    stack, llm = drain_stack, drain_stack.llm
    first = await stack.start_worker("worker-draining")
    second: ManagedProcess | None = None
    try:
        async with http_client(stack.settings.gateway_port) as http:
            run = await start(http, graph_spec=one_agent_graph(), input={"question": "Drain?"})
            async with asyncio.timeout(30):
                await llm.arrived.wait()  # the LLM turn's activity is running in `first`

            sigterm(first)
            await eventually(
                lambda: "worker stopping" in first.log_tail(200),
                what="the worker begins its drain",
                timeout=30,
                alive=first.alive,
            )
            assert first.alive(), "the worker waits for its running activity"
            llm.release.set()
            assert await exit_code(first, timeout=30) == 0

            # The run goes on with the next worker: the activity's result was kept.
            second = await stack.start_worker("worker-after-drain")
            await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=60)
            messages = await updates(http, run)

        assert len(llm.requests) == 1, "the LLM turn ran once"
        assert T.RESTARTING not in [m["t"] for m in messages]
        assert any(ANSWER in str(m) for m in messages)

        history = stack.temporal.get_workflow_handle(run["workflow_id"]).fetch_history_events()
        attempts, completed_by = [], []
        async for event in history:
            if event.HasField("activity_task_started_event_attributes"):
                attempts.append(event.activity_task_started_event_attributes.attempt)
            if event.HasField("activity_task_completed_event_attributes"):
                completed_by.append(event.activity_task_completed_event_attributes.identity)
            assert not event.HasField("activity_task_timed_out_event_attributes")
            assert not event.HasField("activity_task_failed_event_attributes")
        assert attempts and set(attempts) == {1}, attempts
        # The LLM turn was completed by the worker that was told to stop.
        assert completed_by[0].startswith(f"{first.pid}@"), completed_by
    finally:
        llm.release.set()
        first.stop()
        if second is not None:
            second.stop()


async def test_sigterm_ends_open_streams_with_a_retry_hint(drain_stack: DrainStack) -> None:
    stack = drain_stack
    worker = await stack.start_worker("worker-for-streams")
    port_a = free_port()
    leaving = stack.gateway_on("gateway-a", port_a)
    await asyncio.to_thread(leaving.start)
    try:
        async with (
            http_client(port_a) as http_a,
            http_client(stack.settings.gateway_port) as http_b,
        ):
            run = await start(http_a, graph_spec=approval_graph("drain-sse"), input={"topic": "x"})
            path = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
            async with open_sse(http_a, path) as sse:
                assert sse.response.status_code == 200
                await sse.until_type(T.REQUEST_INPUT)  # live and idle: the run waits for us
                hint_before = sse.parser.retry
                sigterm(leaving)
                with contextlib.suppress(StreamEnded):
                    while True:  # the rest of what A sends, up to its clean end
                        await sse.next_item(timeout=20)
                assert sse.ended, "the response ends cleanly, not by a dropped connection"
            seen = list(sse.events)

            assert hint_before == 2000  # the usual hint, sent first
            assert sse.parser.retry is not None
            assert DRAIN_RETRY_MS <= sse.parser.retry <= 2 * DRAIN_RETRY_MS
            assert isinstance(sse.comments[-1], SseComment)
            assert "shutting down" in sse.comments[-1].text
            assert await exit_code(leaving, timeout=20) == 0

            # The client resumes on the other gateway, as EventSource would.
            reply = await answer(http_b, run, {"data": {"decision": "approve"}})
            assert reply.status_code == 200, reply.text
            async with open_sse(http_b, path, headers={"Last-Event-ID": seen[-1].id or ""}) as sse:
                assert sse.response.status_code == 200
                rest = await sse.read_to_end(timeout=60)
                assert sse.ended
            everything = seen + rest
            assert_contiguous(everything)
            assert [e.json() for e in everything] == await updates(http_b, run)
            assert everything[-1].json()["t"] == T.COMPLETE
    finally:
        leaving.stop()
        worker.stop()
