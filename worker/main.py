"""The worker process: ``python -m worker.main``.

Connects to Temporal, Redis and MongoDB from ``Settings`` (environment), publishes
its catalog (node types and tools) for the gateway to validate graphs against,
then polls its task queue until SIGINT/SIGTERM, when it stops polling and lets
running activities finish (graceful drain) before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from shared.logging_setup import configure_logging
from shared.settings import Settings
from shared.telemetry import setup_tracing, temporal_interceptors
from shared.temporal_converter import data_converter
from worker.activities import build_activities
from worker.activities.artifacts import artifact_activities
from worker.activities.workstream import workstream_activities
from worker.llm.base import LlmProvider, provider_from_settings
from worker.metrics_server import sdk_metrics_runtime, serve_metrics
from worker.registry import build_catalog

if TYPE_CHECKING:
    from shared.archive import RunArchive
    from shared.bus import MessageBus

logger = logging.getLogger(__name__)

# Modules the sandbox shares with the worker instead of re-importing per run:
# ours are deterministic models; the rest are pure third-party libraries.
PASSTHROUGH_MODULES = (
    "shared",
    "pydantic",
    "pydantic_core",
    "jmespath",
    "jsonschema",
    "referencing",
    "rpds",
    "jsonschema_specifications",
    "orjson",
    "yaml",
    # Tracing state (current span, context vars) must be the worker's, not a copy.
    "opentelemetry",
)
DRAIN_TIMEOUT = timedelta(seconds=30)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox (on), with our deterministic modules passed through."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )


def workflow_classes() -> list[type[Any]]:
    """The workflow classes this worker runs: graph runs and their workstreams."""
    from worker.workflows.graph_run import GraphRun
    from worker.workflows.workstream import Workstream

    return [GraphRun, Workstream]


def build_worker(
    client: Client,
    settings: Settings,
    *,
    bus: MessageBus,
    archive: RunArchive | None,
    llm: LlmProvider | None = None,
    task_queue: str | None = None,
    **worker_options: Any,
) -> Worker:
    """A Temporal worker running the graph workflows and all their activities.

    Args:
        client: connected with ``shared.temporal_converter.data_converter``.
        settings: task queue and concurrency limits.
        bus: where activities post messages.
        archive: where they archive; None when the archive is disabled.
        llm: LLM provider; default: from ``settings.llm_provider``.
        task_queue: default: ``settings.task_queue``.
        worker_options: extra ``temporalio.worker.Worker`` keyword arguments.
    """
    provider = llm if llm is not None else provider_from_settings(settings)
    options: dict[str, Any] = {
        "max_concurrent_activities": settings.worker_max_concurrent_activities,
        "max_concurrent_local_activities": settings.worker_max_concurrent_activities,
        "graceful_shutdown_timeout": DRAIN_TIMEOUT,
        "workflow_runner": workflow_runner(),
    }
    options.update(worker_options)
    return Worker(
        client,
        task_queue=task_queue or settings.task_queue,
        workflows=workflow_classes(),
        activities=[
            *build_activities(bus, archive, provider),
            *workstream_activities(bus, archive),
            *artifact_activities(archive),
        ],
        **options,
    )


def redact_url(url: str) -> str:
    """A URL without its password, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:***@{host}" if parts.username else f"***@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


async def publish_catalog(archive: RunArchive | None) -> None:
    """Save this worker's node types and tools for the gateway (best-effort)."""
    if archive is None:
        return
    try:
        await archive.save_catalog(build_catalog())
    except Exception as exc:
        logger.warning("cannot publish the catalog to MongoDB: %s", exc)


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Run a worker until ``stop`` is set (by default: until SIGINT/SIGTERM)."""
    from shared.archive import RunArchive
    from shared.archive_outbox import ArchiveCatchUp, ArchiveOutbox, attach_outbox
    from shared.bus import MessageBus
    from shared.push_notifications import PushDelivery, PushOutbox

    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

    tracer_provider = setup_tracing("spindle-worker", settings)
    client = await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(settings),
        runtime=sdk_metrics_runtime(settings),
        # Workers inherit client interceptors: workflow and activity spans join
        # the trace of the request that started the run.
        interceptors=temporal_interceptors(tracer_provider),
    )
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings) if settings.archive_enabled else None
    # Archive writes MongoDB cannot take wait in Redis; this process helps replay them.
    catch_up: ArchiveCatchUp | None = None
    if archive is not None:
        outbox = ArchiveOutbox(bus.redis, settings.mongo_db)
        attach_outbox(archive, outbox)
        catch_up = ArchiveCatchUp(outbox, archive)
    llm = provider_from_settings(settings)
    # Task-update callbacks (seed 003 push notifications) queued by any process.
    push = PushDelivery(PushOutbox(bus.redis))
    try:
        push.start()
        if catch_up is not None:
            catch_up.start()
        if archive is not None:
            try:
                await archive.ensure_indexes()
            except Exception as exc:
                logger.warning("cannot create MongoDB indexes: %s", exc)
        await publish_catalog(archive)
        worker = build_worker(client, settings, bus=bus, archive=archive, llm=llm)
        async with worker, serve_metrics(settings):
            logger.info(
                "worker polling task queue %r on Temporal %s (namespace %s); Redis %s; "
                "MongoDB %s; LLM %s",
                settings.task_queue,
                settings.temporal_address,
                settings.temporal_namespace,
                redact_url(settings.redis_url),
                redact_url(settings.mongo_url) if archive is not None else "disabled",
                llm.name,
            )
            await stop.wait()
            logger.info("worker stopping: draining running activities")
        logger.info("worker stopped")
    finally:
        close = getattr(llm, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
        if catch_up is not None:
            await catch_up.stop()
        await push.stop()
        await bus.close()
        if archive is not None:
            await archive.close()
        if tracer_provider is not None:
            await asyncio.to_thread(tracer_provider.shutdown)


def main() -> None:
    """Entry point of ``python -m worker.main``."""
    settings = Settings()
    configure_logging(settings)
    asyncio.run(run_worker(settings))


if __name__ == "__main__":
    main()
