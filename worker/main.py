"""The worker process: ``python -m spindle.worker.main``.

Connects to Temporal, Redis and MongoDB from ``Settings`` (environment), publishes
its catalog (node types and tools) for the gateway to validate graphs against,
then polls its task queues (``polled_queues``) until SIGINT/SIGTERM, when it
stops polling and lets running activities finish (graceful drain) before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.worker import Worker

from spindle.shared.platform.logging_setup import configure_logging, redact_url
from spindle.shared.platform.settings import Settings
from spindle.shared.platform.telemetry import setup_tracing, temporal_interceptors
from spindle.shared.temporal.client import connect_temporal
from spindle.worker.activities import build_activities
from spindle.worker.activities.artifacts import artifact_activities
from spindle.worker.activities.conversation import conversation_activities
from spindle.worker.activities.evaluation import evaluation_activities
from spindle.worker.activities.workstream import workstream_activities
from spindle.worker.llm.base import LlmProvider
from spindle.worker.llm.providers import provider_from_settings
from spindle.worker.offerings import build_catalog, load_offerings
from spindle.worker.sandbox import workflow_runner
from spindle.worker.telemetry.metrics_server import sdk_metrics_runtime, serve_metrics
from spindle.worker.telemetry.node_logs import NodeLogInterceptor
from spindle.worker.tools.mcp_client import McpToolCache

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive

logger = logging.getLogger(__name__)


def drain_timeout(settings: Settings) -> timedelta:
    """How long a stopping worker lets running activities finish (then cancels them)."""
    return timedelta(seconds=settings.worker_graceful_shutdown_seconds)


def workflow_classes() -> list[type[Any]]:
    """The workflow classes this worker runs: graph runs and their workstreams."""
    from spindle.worker.workflows.conversation import Conversation
    from spindle.worker.workflows.evaluation import Evaluation
    from spindle.worker.workflows.graph_run import GraphRun
    from spindle.worker.workflows.workstreams.child_workflow import Workstream

    return [GraphRun, Workstream, Conversation, Evaluation]


def build_worker(
    client: Client,
    settings: Settings,
    *,
    bus: MessageBus,
    archive: RunArchive | None,
    llm: LlmProvider | None = None,
    task_queue: str | None = None,
    mcp: McpToolCache | None = None,
    **worker_options: Any,
) -> Worker:
    """A Temporal worker running the graph workflows and all their activities.

    Args:
        client: connected with ``spindle.shared.temporal.converter.data_converter``.
        settings: task queue and concurrency limits; the activities are given them.
        bus: where activities post messages.
        archive: where they archive; None when the archive is disabled.
        llm: LLM provider; default: from ``settings.llm_provider``.
        task_queue: default: ``settings.task_queue``.
        mcp: the process's MCP tool cache; default: a new one with ``settings``.
        worker_options: extra ``temporalio.worker.Worker`` keyword arguments.
    """
    provider = llm if llm is not None else provider_from_settings(settings)
    mcp = mcp if mcp is not None else McpToolCache(settings)
    options: dict[str, Any] = {
        "max_concurrent_activities": settings.worker_max_concurrent_activities,
        "max_concurrent_local_activities": settings.worker_max_concurrent_activities,
        "graceful_shutdown_timeout": drain_timeout(settings),
        "workflow_runner": workflow_runner(),
        # A log line as each node activity starts and finishes (docs/operations/observability.md).
        "interceptors": [NodeLogInterceptor()],
    }
    options.update(worker_options)
    # The workflows read plug-in specs (timeouts, retries) from the registry,
    # which they must not load themselves: load them before they run.
    load_offerings()
    with _collector_paused():
        return Worker(
            client,
            task_queue=task_queue or settings.task_queue,
            workflows=workflow_classes(),
            activities=worker_activities(bus, archive, provider, settings=settings, mcp=mcp),
            **options,
        )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Collect garbage now, and run no collection until the block ends.

    ``Worker(...)`` validates the workflows by importing them in the sandbox. On
    Python before 3.12, a finalizer that imports (a ResourceWarning of some unclosed
    object) run by the collector inside an import's module-lock window raises
    ``KeyError(<thread id>)`` and the worker fails to start ("Failed validating
    workflow"; temporalio/sdk-python issue 585). Seen once in this suite's CI.
    """
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def worker_activities(
    bus: MessageBus,
    archive: RunArchive | None,
    llm: LlmProvider,
    *,
    settings: Settings,
    mcp: McpToolCache | None = None,
) -> list[Callable[..., Any]]:
    """Every activity a graph run or a workstream schedules, given ``settings``
    and the process's ``mcp`` tool cache."""
    return [
        *build_activities(bus, archive, llm, settings=settings, mcp=mcp),
        *workstream_activities(bus, archive, settings=settings),
        *artifact_activities(archive),
        *conversation_activities(bus, archive),
        *evaluation_activities(bus, archive, settings=settings),
    ]


def polled_queues(settings: Settings) -> list[str]:
    """The task queues this worker polls, main queue first if it is one of them."""
    queues = list(dict.fromkeys(settings.worker_task_queues)) or [settings.task_queue]
    return sorted(queues, key=lambda queue: queue != settings.task_queue)


def build_workers(
    client: Client,
    settings: Settings,
    *,
    bus: MessageBus,
    archive: RunArchive | None,
    llm: LlmProvider | None = None,
    **worker_options: Any,
) -> list[Worker]:
    """One Temporal worker per polled queue (``polled_queues``).

    On the main queue (``settings.task_queue``) it is ``build_worker``'s, with
    workflows and activities; on any other queue it runs activities only, the
    ones of nodes a graph routes there, while their runs stay on the main queue.
    """
    provider = llm if llm is not None else provider_from_settings(settings)
    # One MCP tool cache per process: its per-destination gate counts all its calls.
    mcp = McpToolCache(settings)
    workers = []
    for queue in polled_queues(settings):
        if queue == settings.task_queue:
            workers.append(
                build_worker(
                    client,
                    settings,
                    bus=bus,
                    archive=archive,
                    llm=provider,
                    mcp=mcp,
                    **worker_options,
                )
            )
            continue
        options: dict[str, Any] = {
            "max_concurrent_activities": settings.worker_max_concurrent_activities,
            "graceful_shutdown_timeout": drain_timeout(settings),
            "interceptors": [NodeLogInterceptor()],
            **worker_options,
        }
        workers.append(
            Worker(
                client,
                task_queue=queue,
                activities=worker_activities(bus, archive, provider, settings=settings, mcp=mcp),
                **options,
            )
        )
    return workers


async def publish_catalog(archive: RunArchive | None) -> None:
    """Save this worker's node types and tools for the gateway (best-effort)."""
    if archive is None:
        return
    try:
        await archive.save_catalog(build_catalog())
    except Exception as exc:
        logger.warning("cannot publish the catalog to MongoDB: %s", exc)


@dataclass(frozen=True)
class WorkerServices:
    """The connections one worker process runs on (``worker_services``)."""

    client: Client
    bus: MessageBus
    archive: RunArchive | None
    llm: LlmProvider


@contextlib.asynccontextmanager
async def worker_services(settings: Settings) -> AsyncIterator[WorkerServices]:
    """Connect to Temporal, Redis and MongoDB and start the process's background loops
    (archive catch-up, push delivery); close and stop them all on the way out."""
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.platform.outbound import outbound_policy
    from spindle.shared.store.archive import RunArchive
    from spindle.shared.tasks.push import DeliveryLimits, PushDelivery, PushOutbox
    from spindle.worker.archive.catch_up import ArchiveCatchUp
    from spindle.worker.archive.outbox import ArchiveOutbox
    from spindle.worker.archive.writes import attach_outbox

    tracer_provider = setup_tracing("spindle-worker", settings)
    client = await connect_temporal(
        settings,
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
    push = PushDelivery(
        PushOutbox(bus.redis, DeliveryLimits.from_settings(settings)),
        policy=outbound_policy(settings),
    )
    try:
        push.start()
        if catch_up is not None:
            catch_up.start()
        if archive is not None:
            try:
                await archive.ensure_indexes()
            except Exception as exc:
                logger.warning("cannot create MongoDB indexes: %s", exc)
        yield WorkerServices(client=client, bus=bus, archive=archive, llm=llm)
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


def stop_on_signals() -> asyncio.Event:
    """An event SIGINT or SIGTERM sets (in the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_worker(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Run a worker until ``stop`` is set (by default: until SIGINT/SIGTERM)."""
    if stop is None:
        stop = stop_on_signals()
    async with worker_services(settings) as services:
        await publish_catalog(services.archive)
        workers = build_workers(
            services.client,
            settings,
            bus=services.bus,
            archive=services.archive,
            llm=services.llm,
        )
        async with contextlib.AsyncExitStack() as running, serve_metrics(settings):
            for worker in workers:
                await running.enter_async_context(worker)
            log_polling(settings, services)
            await stop.wait()
            logger.info(
                "worker stopping: polling no more, draining running activities (up to %.0f s)",
                settings.worker_graceful_shutdown_seconds,
            )
        logger.info("worker stopped")


def log_polling(settings: Settings, services: WorkerServices) -> None:
    """Log what the worker polls and what it is connected to."""
    logger.info(
        "worker polling task queue %s on Temporal %s (namespace %s); Redis %s; MongoDB %s; LLM %s",
        ", ".join(
            repr(queue) if queue == settings.task_queue else f"{queue!r} (activities only)"
            for queue in polled_queues(settings)
        ),
        settings.temporal_address,
        settings.temporal_namespace,
        redact_url(settings.redis_url),
        redact_url(settings.mongo_url) if services.archive is not None else "disabled",
        services.llm.name,
    )


def main(task_queues: list[str] | None = None) -> None:
    """Entry point of ``python -m spindle.worker.main`` and ``spindle worker``.

    Args:
        task_queues: the queues to poll (``spindle worker --task-queue``); default:
            ``SPINDLE_WORKER_TASK_QUEUES``, else the main queue.
    """
    settings = Settings()
    if task_queues:
        settings = settings.model_copy(update={"worker_task_queues": task_queues})
    configure_logging(settings)
    with asyncio.Runner(loop_factory=event_loop_factory(settings)) as runner:
        runner.run(run_worker(settings))


def event_loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The worker's event loop (``SPINDLE_WORKER_EVENT_LOOP``); None: the standard one.

    uvloop cut the worker's CPU per run by about an eighth: the Temporal bridge
    wakes the loop from its threads for every poll and completion, and the
    node activities' Redis and MongoDB sockets are its other work
    (docs/operations/scaling.md#worker-event-loop).
    """
    if settings.worker_event_loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # not installed (Windows): the standard loop
        logger.info("uvloop is not installed: the worker runs on the standard asyncio loop")
        return None
    return uvloop.new_event_loop


if __name__ == "__main__":
    main()
