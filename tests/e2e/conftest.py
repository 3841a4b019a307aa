"""End-to-end fixtures: a real worker process and a real gateway process.

Both are started once per session as subprocesses (``python -m spindle.worker.main`` and
``python -m spindle.gateway.main``) against the session's Temporal dev server, Redis
and Mongo wire server, on a task queue and database of their own. Tests talk
to the gateway over HTTP only. The worker can be SIGKILLed and restarted by a
test (``stack.kill_worker()`` / ``await stack.restart_worker()``).

Auth is ON, as in production: ``callers`` holds real API keys (created in the
stack's database) for two tenants, and ``http`` acts as ``alice`` of tenant A.
JWTs are accepted with the HS256 secret ``E2E_JWT_SECRET``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from spindle.dev.processes import ManagedProcess, free_port, python_module
from spindle.shared.platform.settings import ModelPrice, Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.polling import eventually

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO_ROOT / "worker" / "examples"
WORKER_READY_TIMEOUT = 60.0
E2E_JWT_SECRET = secrets.token_urlsafe(32)
E2E_JWT_ISSUER = "https://issuer.e2e.test"
E2E_JWT_AUDIENCE = "spindle-e2e"


def subprocess_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process read exactly these settings."""
    return {
        "SPINDLE_TEMPORAL_ADDRESS": settings.temporal_address,
        "SPINDLE_TEMPORAL_NAMESPACE": settings.temporal_namespace,
        "SPINDLE_TASK_QUEUE": settings.task_queue,
        "SPINDLE_REDIS_URL": settings.redis_url,
        "SPINDLE_MONGO_URL": settings.mongo_url,
        "SPINDLE_MONGO_DB": settings.mongo_db,
        "SPINDLE_GATEWAY_HOST": settings.gateway_host,
        "SPINDLE_GATEWAY_PORT": str(settings.gateway_port),
        "SPINDLE_SSE_KEEPALIVE_SECONDS": str(settings.sse_keepalive_seconds),
        "SPINDLE_LLM_PROVIDER": settings.llm_provider,
        "SPINDLE_AUTH_DISABLED": "true" if settings.auth_disabled else "false",
        "SPINDLE_AUTH_SECRET": settings.auth_secret or "",
        "SPINDLE_JWT_SECRET": settings.jwt_secret or "",
        "SPINDLE_JWT_ISSUER": settings.jwt_issuer or "",
        "SPINDLE_JWT_AUDIENCE": settings.jwt_audience or "",
        "SPINDLE_STREAM_TOKEN_TTL_SECONDS": str(settings.stream_token_ttl_seconds),
        "SPINDLE_API_KEY_CACHE_SECONDS": str(settings.api_key_cache_seconds),
        "SPINDLE_AUTH_FAILURE_LIMIT": str(settings.auth_failure_limit),
        "SPINDLE_AUTH_FAILURE_WINDOW_SECONDS": str(settings.auth_failure_window_seconds),
        "SPINDLE_RATE_LIMIT_RUN_STARTS": str(settings.rate_limit_run_starts),
        "SPINDLE_RATE_LIMIT_SIGNALS": str(settings.rate_limit_signals),
        "SPINDLE_MAX_STREAMS_PER_TENANT": str(settings.max_streams_per_tenant),
        "SPINDLE_MAX_BODY_BYTES": str(settings.max_body_bytes),
        "SPINDLE_MAX_UPLOAD_BYTES": str(settings.max_upload_bytes),
        "SPINDLE_OUTBOUND_ALLOW": settings.outbound_allow,
        "SPINDLE_CORS_ALLOW_ORIGINS": json.dumps(settings.cors_allow_origins),
        "SPINDLE_JSONRPC_MAX_BATCH": str(settings.jsonrpc_max_batch),
        "SPINDLE_MODEL_PRICES": json.dumps(
            {model: price.model_dump() for model, price in settings.model_prices.items()}
        ),
        "SPINDLE_LOG_LEVEL": "INFO",
        # No worker metrics ports: parallel sessions would fight over them.
        "SPINDLE_WORKER_METRICS_PORT": "0",
        "PYTHONUNBUFFERED": "1",
    }


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def start_gateway(settings: Settings, name: str, logs: Path) -> ManagedProcess:
    """A gateway process of its own (other limits, other servers), ready to serve."""
    base = f"http://127.0.0.1:{settings.gateway_port}"
    return ManagedProcess(
        name,
        python_module("spindle.gateway.main"),
        log_path=logs / f"{name.replace(' ', '-')}.log",
        env=subprocess_env(settings),
        cwd=REPO_ROOT,
        ready=lambda: _healthy(f"{base}/healthz"),
        ready_timeout=60,
    ).start()


async def wait_for_worker(
    client: Client,
    task_queue: str,
    pid: int,
    proc: ManagedProcess,
    *,
    activities_only: bool = False,
) -> None:
    """Wait until the worker process ``pid`` polls both task-queue types (only the
    activity type with ``activities_only``: a secondary queue).

    Pollers are identified as ``<pid>@<host>`` (the SDK's default identity), so a
    restarted worker is told apart from the one that was killed.
    """
    prefix = f"{pid}@"
    kinds: tuple[TaskQueueType.ValueType, ...] = (TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,)
    if not activities_only:
        kinds = (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, *kinds)

    async def polling_both() -> bool:
        polling = []
        for kind in kinds:
            reply = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=task_queue),
                    task_queue_type=kind,
                )
            )
            polling.append(any(p.identity.startswith(prefix) for p in reply.pollers))
        return all(polling)

    try:
        await eventually(
            polling_both,
            what=f"worker {pid} polls {task_queue}",
            timeout=WORKER_READY_TIMEOUT,
            interval=0.1,
            alive=proc.alive,
        )
    except AssertionError as exc:
        raise RuntimeError(f"{exc}\n{proc.log_tail()}") from exc


@dataclass
class SpindleStack:
    """The running worker and gateway processes."""

    settings: Settings
    worker: ManagedProcess
    gateway: ManagedProcess
    temporal: Client

    @property
    def base_url(self) -> str:
        return f"http://{self.settings.gateway_host}:{self.settings.gateway_port}"

    def kill_worker(self) -> None:
        """SIGKILL the worker (a crash: no drain, no goodbye to Temporal)."""
        self.worker.kill()

    async def start_worker(self) -> None:
        self.worker.start()
        assert self.worker.pid is not None
        await wait_for_worker(self.temporal, self.settings.task_queue, self.worker.pid, self.worker)

    async def restart_worker(self) -> None:
        if not self.worker.alive():
            await self.start_worker()

    def kill_gateway(self) -> None:
        """SIGKILL the gateway: open streams drop with no goodbye."""
        self.gateway.kill()

    async def restart_gateway(self) -> None:
        """Start the gateway again (same port) if it is down; wait until it answers."""
        if not self.gateway.alive():
            self.gateway.start(wait=False)
            await asyncio.to_thread(self.gateway.wait_ready)


@pytest.fixture(scope="session")
def e2e_settings(settings: Settings) -> Settings:
    """The session settings with a task queue, database and port of the e2e stack."""
    return settings.model_copy(
        update={
            "task_queue": "spindle-e2e",
            "mongo_db": "spindle_e2e",
            "gateway_host": "127.0.0.1",
            "gateway_port": free_port(),
            "sse_keepalive_seconds": 1.0,
            "auth_disabled": False,
            "auth_secret": secrets.token_urlsafe(32),
            "jwt_secret": E2E_JWT_SECRET,
            "jwt_issuer": E2E_JWT_ISSUER,
            "jwt_audience": E2E_JWT_AUDIENCE,
            "api_key_cache_seconds": 0.5,
            "max_upload_bytes": 1_048_576,
            # The shared stack must not throttle the suite; tests/e2e/test_limits.py
            # runs a gateway of its own with tight limits.
            "rate_limit_run_starts": 100_000,
            "rate_limit_signals": 100_000,
            "max_streams_per_tenant": 10_000,
            # Every test calls from 127.0.0.1, many with bad credentials on purpose;
            # tests/e2e/test_auth_doors.py throttles a gateway of its own.
            "auth_failure_limit": 100_000,
            # The tests' callback receivers listen on 127.0.0.1 (only that address:
            # tests/e2e/test_outbound.py checks that the rest of loopback is refused).
            "outbound_allow": "127.0.0.1/32",
            # Budgets' cost: the offline model gets a price (tests/e2e/test_budgets.py).
            "model_prices": {"offline": ModelPrice(input_per_1k=0.5, output_per_1k=1.5)},
        }
    )


@dataclass(frozen=True)
class Caller:
    """A user of a tenant with a real API key."""

    tenant: str
    user: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="session")
async def callers(e2e_settings: Settings) -> dict[str, Caller]:
    """alice (tenant A, graph-editor: registers graphs, controls only her runs), bob
    (tenant A, no roles), carol (tenant A, admin), mallory (tenant B, graph-editor),
    and sam (tenant C, graph-editor), whose runs on private task queues no other test walks."""
    suffix = uuid.uuid4().hex[:6]
    people = {
        "alice": (f"tenant-a-{suffix}", ["graph-editor"]),
        "bob": (f"tenant-a-{suffix}", []),
        "carol": (f"tenant-a-{suffix}", ["admin"]),
        "mallory": (f"tenant-b-{suffix}", ["graph-editor"]),
        "sam": (f"tenant-c-{suffix}", ["graph-editor"]),
    }
    store = ApiKeyStore.from_settings(e2e_settings)
    try:
        made = {}
        for user, (tenant, roles) in people.items():
            created = await store.create(tenant_id=tenant, user_id=user, roles=roles)
            made[user] = Caller(tenant, user, created.key)
    finally:
        await store.close()
    return made


@asynccontextmanager
async def running_stack(
    settings: Settings, temporal: Client, logs: Path, *, extra_env: dict[str, str] | None = None
) -> AsyncIterator[SpindleStack]:
    """A worker and a gateway subprocess on ``settings`` (plus ``extra_env``), stopped on exit."""
    env = subprocess_env(settings) | (extra_env or {})
    base = f"http://{settings.gateway_host}:{settings.gateway_port}"
    worker = ManagedProcess(
        "worker",
        python_module("spindle.worker.main"),
        log_path=logs / "worker.log",
        env=env,
        cwd=REPO_ROOT,
    )
    gateway = ManagedProcess(
        "gateway",
        python_module("spindle.gateway.main"),
        log_path=logs / "gateway.log",
        env=env,
        cwd=REPO_ROOT,
        ready=lambda: _healthy(f"{base}/healthz"),
        ready_timeout=60,
    )
    running = SpindleStack(settings, worker, gateway, temporal)
    gateway.start(wait=False)
    try:
        await running.start_worker()
        gateway.wait_ready()
        yield running
    finally:
        gateway.stop()
        worker.stop()


@pytest.fixture(scope="session")
async def stack(
    e2e_settings: Settings, temporal_client: Client, artifacts_dir: Path
) -> AsyncIterator[SpindleStack]:
    async with running_stack(e2e_settings, temporal_client, artifacts_dir / "e2e") as running:
        yield running


def client_for(stack: SpindleStack, caller: Caller | None) -> httpx.AsyncClient:
    """An HTTP client of the gateway acting as ``caller`` (None: no credentials);
    generous read timeout: SSE reads are bounded by the tests' own deadlines."""
    timeout = httpx.Timeout(30.0, connect=5.0)
    headers = caller.headers if caller is not None else {}
    return httpx.AsyncClient(base_url=stack.base_url, timeout=timeout, headers=headers)


@pytest.fixture(scope="session")
async def clients(
    stack: SpindleStack, callers: dict[str, Caller]
) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """A client per caller (alice, bob, carol, mallory) and ``anonymous``."""
    made = {name: client_for(stack, caller) for name, caller in callers.items()}
    made["anonymous"] = client_for(stack, None)
    yield made
    for client in made.values():
        await client.aclose()


@pytest.fixture(scope="session")
async def http(stack: SpindleStack, callers: dict[str, Caller]) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway as alice of tenant A."""
    async with client_for(stack, callers["alice"]) as client:
        yield client


def example_graph(name: str) -> dict[str, Any]:
    """An example graph shipped in worker/examples, as the JSON a client would send."""
    data = yaml.safe_load((EXAMPLES_DIR / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="session")
async def examples(http: httpx.AsyncClient) -> list[str]:
    """Register every example graph through ``PUT /graphs/{name}``."""
    names = []
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        reply = await http.put(f"/graphs/{spec['name']}", json=spec)
        assert reply.status_code in (200, 201), reply.text
        names.append(spec["name"])
    return names


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]
