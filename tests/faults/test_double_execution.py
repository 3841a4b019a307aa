"""No silent double execution: a worker frozen mid-node (SIGSTOP) past the node's
heartbeat timeout has the node retried on another worker; when it wakes up
(SIGCONT) with its old attempt's result, that result lands nowhere. The stream
shows RESTARTING with the attempt that ran, every message of the node carries
that attempt, and the archive's report of the node is that attempt's.

The LLM is a chat-completions server on loopback that holds its first request
(attempt 1, on the frozen worker) until the test releases it, and answers any
later one at once, with another text: "mid-node" and "which attempt said
this" are facts, not timing guesses. The node's heartbeat timeout (2 s) is the
only wall-clock wait.
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
from tests.e2e.run_driver import T, answer, start, updates, wait_for_status
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

HEARTBEAT_SECONDS = 2
LATE = "Late answer from the frozen attempt."
FRESH = "Fresh answer from the retry."


@dataclass
class FirstHeldLlm:
    """Holds the first chat completion until ``release``; answers later ones at once."""

    port: int = 0
    requests: int = 0
    first_arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                await reader.readexactly(length)
                self.requests += 1
                text = FRESH
                if self.requests == 1:
                    self.first_arrived.set()
                    await self.release.wait()
                    text = LATE
                writer.write(_completion(self.requests, text))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _completion(n: int, text: str) -> bytes:
    body = orjson.dumps(
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "held-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    )
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    return head % len(body) + body


@dataclass
class TwoWorkerStack:
    settings: Settings
    env: dict[str, str]
    llm: FirstHeldLlm
    temporal: Client
    logs: Path

    def worker(self, name: str) -> ManagedProcess:
        return ManagedProcess(
            name,
            python_module("spindle.worker.main"),
            log_path=self.logs / f"{name}.log",
            env=self.env,
            cwd=REPO_ROOT,
        )

    async def start_worker(self, name: str) -> ManagedProcess:
        proc = self.worker(name).start()
        assert proc.pid is not None
        await wait_for_worker(self.temporal, self.settings.task_queue, proc.pid, proc)
        return proc


@pytest.fixture
async def two_workers(
    settings: Settings, temporal_client: Client, artifacts_dir: Path
) -> AsyncIterator[TwoWorkerStack]:
    llm = FirstHeldLlm()
    server = await asyncio.start_server(llm.handle, "127.0.0.1", 0)
    llm.port = server.sockets[0].getsockname()[1]
    ours = settings.model_copy(
        update={
            "task_queue": f"spindle-fence-{uuid.uuid4().hex[:6]}",
            "mongo_db": "spindle_fence",
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
    }
    logs = artifacts_dir / "double-execution"
    base = f"http://127.0.0.1:{ours.gateway_port}"
    gateway = ManagedProcess(
        "gateway",
        python_module("spindle.gateway.main"),
        log_path=logs / "gateway.log",
        env=env,
        cwd=REPO_ROOT,
        ready=lambda: _healthy(f"{base}/healthz"),
        ready_timeout=60,
    )
    await asyncio.to_thread(gateway.start)
    try:
        yield TwoWorkerStack(ours, env, llm, temporal_client, logs)
    finally:
        llm.release.set()
        gateway.stop()
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()


def signal_group(proc: ManagedProcess, sig: signal.Signals) -> None:
    assert proc.pid is not None
    os.killpg(proc.pid, sig)  # the child leads its own process group


def think_then_ask(name: str) -> dict[str, Any]:
    """One LLM turn (heartbeating every 2/3 s), then a prompt that keeps the run
    (and its stream) open while the frozen attempt wakes up."""
    return {
        "name": name,
        "entry": "think",
        "nodes": [
            {
                "id": "think",
                "type": "agent",
                "params": {"prompt": "{{ input.question }}"},
                "heartbeat_seconds": HEARTBEAT_SECONDS,
                "retry": {"max_attempts": 10, "initial_interval_seconds": 0.2},
            },
            {
                "id": "ask",
                "type": "prompt",
                "params": {
                    "prompt": "Done?",
                    "ui_schema": {
                        "type": "object",
                        "properties": {"decision": {"type": "string"}},
                        "required": ["decision"],
                    },
                },
            },
            {"id": "out", "type": "output", "params": {"select": "think"}},
        ],
        "edges": [{"from": "think", "to": "ask"}, {"from": "ask", "to": "out"}],
    }


async def test_a_frozen_workers_attempt_lands_nothing_after_the_retry(
    two_workers: TwoWorkerStack,
) -> None:
    stack, llm = two_workers, two_workers.llm
    frozen = await stack.start_worker("worker-frozen")
    spare: ManagedProcess | None = None
    stopped = False
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{stack.settings.gateway_port}",
            timeout=httpx.Timeout(30.0, connect=5.0),
        ) as http:
            run = await start(
                http, graph_spec=think_then_ask(f"fence-{uuid.uuid4().hex[:8]}"), input=None
            )
            async with asyncio.timeout(60):
                await llm.first_arrived.wait()  # attempt 1 runs in `frozen`

            spare = await stack.start_worker("worker-spare")
            signal_group(frozen, signal.SIGSTOP)
            stopped = True
            # Past the heartbeat timeout Temporal retries the node: on `spare`.
            await wait_for_status(http, run["workflow_id"], {"paused"}, timeout=150)
            assert llm.requests >= 2

            said = await updates(http, run)
            [fresh] = [m for m in said if m["t"] == T.ANSWER]
            assert fresh["m"] == FRESH
            attempt = fresh["d"]["attempt"]
            assert attempt >= 2
            of_node = [m for m in said if m.get("i") == fresh["i"]]
            restarting = [m for m in of_node if m["t"] == T.RESTARTING]
            assert [m["d"]["attempt"] for m in restarting] == [attempt]
            assert restarting[0]["m"].endswith(f"(attempt {attempt})")
            assert {m["d"]["attempt"] for m in of_node} == {attempt}

            # The frozen attempt gets its (late) answer, then wakes up.
            llm.release.set()
            signal_group(frozen, signal.SIGCONT)
            stopped = False
            # It ends either refused by the fence (its post or report finds the newer
            # attempt) or cancelled by the SDK (its first heartbeat finds the attempt
            # gone), whichever it meets first; the worker reports the attempt's end.
            ended = f"'activity_id': '{fresh['i']}', 'activity_type': 'llm_turn', 'attempt': 1,"
            await eventually(
                lambda: any(
                    "Completing activity" in line and ended in line
                    for line in frozen.log_tail(400).splitlines()
                ),
                what="the frozen attempt ends",
                timeout=60,
                alive=frozen.alive,
            )

            async def archived_executions() -> list[dict[str, Any]] | None:
                # Reports reach the archive in the background, behind a drain lock
                # the frozen worker may have held (docs/operations/observability.md#run-archive).
                inspected = await http.get(f"/runs/{run['workflow_id']}/nodes/think")
                assert inspected.status_code == 200, inspected.text
                executions: list[dict[str, Any]] = inspected.json()["executions"]
                return executions if any(FRESH in str(e) for e in executions) else None

            [execution] = await eventually(
                archived_executions, what="the retried attempt's report archived", timeout=30
            )
            assert execution["attempt"] == attempt
            assert LATE not in str(execution)

            reply = await answer(http, run, {"data": {"decision": "yes"}})
            assert reply.status_code == 200, reply.text
            done = await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=60)
            assert done["output"] == FRESH
            said = await updates(http, run)
        assert LATE not in str(said)
        assert [m["m"] for m in said if m["t"] == T.ANSWER] == [FRESH]
        assert said[-1]["t"] == T.COMPLETE
    finally:
        if stopped:
            signal_group(frozen, signal.SIGCONT)
        frozen.stop()
        if spare is not None:
            spare.stop()
