"""``SpindleClient``: the same API without asyncio.

It drives an ``AsyncSpindleClient`` on a private event loop in a daemon
thread, so every method is the async one, awaited there: there is one
implementation of each call. A stream is iterated with a plain ``for``; its
``after_history`` hook is a plain function, run in a worker thread so it may
itself call the client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from spindle.client.async_client import AsyncSpindleClient
from spindle.client.backoff import Random
from spindle.client.config import ClientConfig
from spindle.client.models import (
    Accepted,
    RunBundle,
    RunInfo,
    RunPage,
    RunRef,
    StartedRun,
    StreamedMessage,
    StreamToken,
    UploadedFile,
)
from spindle.client.stream import MessageStream
from spindle.shared.contracts.compare import RunComparison
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import CompleteAck, SignalAck
from spindle.shared.contracts.workstreams import (
    LaunchAck,
    SteerAck,
    SteerCommand,
    TerminateAck,
    WorkstreamAgent,
    WorkstreamInfo,
    WorkstreamList,
    WorkstreamMessageAck,
)

R = TypeVar("R")


class _LoopThread:
    """An event loop running in a daemon thread; ``run`` waits for a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="spindle-client", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, R]) -> R:
        if self.stopped or threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "the SpindleClient is closed"
                if self.stopped
                else "SpindleClient cannot be called from its own event loop"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    @property
    def stopped(self) -> bool:
        return self.loop.is_closed() or not self._thread.is_alive()

    def stop(self) -> None:
        if self.stopped:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


class SyncMessageStream:
    """A ``MessageStream`` read with ``for``; ``close()`` ends it early."""

    def __init__(self, stream: MessageStream, loop: _LoopThread) -> None:
        self.stream = stream
        self._loop = loop
        self._messages = stream.messages()

    def __iter__(self) -> Iterator[StreamedMessage]:
        try:
            while True:
                try:
                    yield self._loop.run(self._next())
                except StopAsyncIteration:
                    return
        finally:
            # Leaving the loop early (break, an exception) closes the connection.
            self.close()

    async def _next(self) -> StreamedMessage:
        return await anext(self._messages)

    def close(self) -> None:
        """Stop reading (closes the connection); harmless once the stream has ended."""
        if not self._loop.stopped:
            self._loop.run(self._messages.aclose())  # type: ignore[attr-defined]


class SpindleClient:
    """A client of one Spindle gateway, for code without asyncio.

    Every method does what the ``AsyncSpindleClient`` method of the same name
    does (see its documentation) and returns its result.

    Args:
        config: where the gateway is and the credentials (default: from the environment).
    """

    def __init__(self, config: ClientConfig | None = None) -> None:
        self._loop = _LoopThread()
        self.aio = self._loop.run(_make_async(config))

    @classmethod
    def from_env(cls, **overrides: Any) -> SpindleClient:
        """A client configured by ``SPINDLE_URL`` / ``SPINDLE_API_KEY`` / ``SPINDLE_TOKEN``."""
        return cls(ClientConfig.from_env(**overrides))

    @property
    def config(self) -> ClientConfig:
        return self.aio.config

    def __enter__(self) -> SpindleClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the private loop (once; later calls do nothing)."""
        if self._loop.stopped:
            return
        self._loop.run(self.aio.aclose())
        self._loop.stop()

    # Each method: the async one, run on the private loop.

    def start_run(
        self,
        graph: str | None = None,
        *,
        input: Any = None,
        graph_spec: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> StartedRun:
        """See ``AsyncSpindleClient.start_run``."""
        return self._loop.run(
            self.aio.start_run(
                graph,
                input=input,
                graph_spec=graph_spec,
                context=context,
                meta=meta,
                idempotency_key=idempotency_key,
            )
        )

    def list_runs(
        self,
        *,
        status: str | None = None,
        graph: str | None = None,
        limit: int = 50,
        offset: int = 0,
        forked_from: str | None = None,
        id_contains: str | None = None,
        conversation: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> RunPage:
        """See ``AsyncSpindleClient.list_runs``."""
        return self._loop.run(
            self.aio.list_runs(
                status=status,
                graph=graph,
                limit=limit,
                offset=offset,
                forked_from=forked_from,
                id_contains=id_contains,
                conversation=conversation,
                created_after=created_after,
                created_before=created_before,
            )
        )

    def fork_run(
        self, run: RunRef, request: ForkRequest | None = None, **fields: Any
    ) -> StartedRun:
        """See ``AsyncSpindleClient.fork_run``."""
        return self._loop.run(self.aio.fork_run(run, request, **fields))

    def compare_runs(self, a: RunRef, b: RunRef) -> RunComparison:
        """See ``AsyncSpindleClient.compare_runs``."""
        return self._loop.run(self.aio.compare_runs(a, b))

    def register_graph(self, spec: GraphSpec | dict[str, Any]) -> GraphSpec:
        """See ``AsyncSpindleClient.register_graph``."""
        return self._loop.run(self.aio.register_graph(spec))

    def get_run(self, run: RunRef) -> RunInfo:
        """See ``AsyncSpindleClient.get_run``."""
        return self._loop.run(self.aio.get_run(run))

    def bundle(self, run: RunRef) -> RunBundle:
        """See ``AsyncSpindleClient.bundle``."""
        return self._loop.run(self.aio.bundle(run))

    def cancel_run(self, run: RunRef, reason: str | None = None) -> Accepted:
        """See ``AsyncSpindleClient.cancel_run``."""
        return self._loop.run(self.aio.cancel_run(run, reason))

    def terminate_run(self, run: RunRef, reason: str | None = None) -> Accepted:
        """See ``AsyncSpindleClient.terminate_run``."""
        return self._loop.run(self.aio.terminate_run(run, reason))

    def history(self, run: RunRef, *, since: int | None = None) -> list[StreamedMessage]:
        """See ``AsyncSpindleClient.history``."""
        return self._loop.run(self.aio.history(run, since=since))

    def stream(
        self,
        run: RunRef,
        *,
        after_history: Callable[[list[StreamedMessage]], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        rand: Random | None = None,
    ) -> SyncMessageStream:
        """See ``AsyncSpindleClient.stream``; iterate the result with ``for``.

        ``after_history`` and ``sleep`` are plain functions here (run in a worker
        thread, so they may call this client).
        """

        async def hook(history: list[StreamedMessage]) -> None:
            assert after_history is not None
            await asyncio.to_thread(after_history, history)

        async def pause(seconds: float) -> None:
            assert sleep is not None
            await asyncio.to_thread(sleep, seconds)

        stream = self._loop.run(
            self.aio.stream(
                run,
                after_history=hook if after_history else None,
                sleep=pause if sleep else None,
                rand=rand,
            )
        )
        return SyncMessageStream(stream, self._loop)

    def stream_token(self, run: RunRef) -> StreamToken:
        """See ``AsyncSpindleClient.stream_token``."""
        return self._loop.run(self.aio.stream_token(run))

    def signal(self, run: RunRef, name: str, body: BaseModel | dict[str, Any]) -> SignalAck:
        """See ``AsyncSpindleClient.signal``."""
        return self._loop.run(self.aio.signal(run, name, body))

    def send_input(
        self,
        run: RunRef,
        message: str | None = None,
        *,
        data: dict[str, Any] | None = None,
        node_id: str | None = None,
        client_message_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SignalAck:
        """See ``AsyncSpindleClient.send_input``."""
        return self._loop.run(
            self.aio.send_input(
                run,
                message,
                data=data,
                node_id=node_id,
                client_message_id=client_message_id,
                metadata=metadata,
            )
        )

    def send_message(
        self,
        run: RunRef,
        message: str,
        *,
        client_message_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        node_id: str | None = None,
        workstream_id: str | None = None,
    ) -> SignalAck:
        """See ``AsyncSpindleClient.send_message``."""
        return self._loop.run(
            self.aio.send_message(
                run,
                message,
                client_message_id=client_message_id,
                metadata=metadata,
                node_id=node_id,
                workstream_id=workstream_id,
            )
        )

    def complete(self, run: RunRef) -> CompleteAck:
        """See ``AsyncSpindleClient.complete``."""
        return self._loop.run(self.aio.complete(run))

    def upload_file(
        self,
        run: RunRef,
        file: str | Path | bytes,
        *,
        name: str | None = None,
        content_type: str | None = None,
    ) -> UploadedFile:
        """See ``AsyncSpindleClient.upload_file``."""
        return self._loop.run(self.aio.upload_file(run, file, name=name, content_type=content_type))

    def list_files(self, run: RunRef) -> list[UploadedFile]:
        """See ``AsyncSpindleClient.list_files``."""
        return self._loop.run(self.aio.list_files(run))

    def download_file(self, run: RunRef, name: str) -> bytes:
        """See ``AsyncSpindleClient.download_file``."""
        return self._loop.run(self.aio.download_file(run, name))

    def launch_workstream(
        self,
        run: RunRef,
        task: str,
        *,
        deadline_seconds: int | None = None,
        interactive: bool = False,
        merge_child_artifacts: bool = True,
        label: str | None = None,
        agent: WorkstreamAgent | dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> LaunchAck:
        """See ``AsyncSpindleClient.launch_workstream``."""
        return self._loop.run(
            self.aio.launch_workstream(
                run,
                task,
                deadline_seconds=deadline_seconds,
                interactive=interactive,
                merge_child_artifacts=merge_child_artifacts,
                label=label,
                agent=agent,
                idempotency_key=idempotency_key,
            )
        )

    def list_workstreams(self, run: RunRef) -> WorkstreamList:
        """See ``AsyncSpindleClient.list_workstreams``."""
        return self._loop.run(self.aio.list_workstreams(run))

    def get_workstream(self, run: RunRef, launch_id: str) -> WorkstreamInfo:
        """See ``AsyncSpindleClient.get_workstream``."""
        return self._loop.run(self.aio.get_workstream(run, launch_id))

    def steer_workstream(
        self, run: RunRef, launch_id: str, command: SteerCommand | str, text: str | None = None
    ) -> SteerAck:
        """See ``AsyncSpindleClient.steer_workstream``."""
        return self._loop.run(self.aio.steer_workstream(run, launch_id, command, text))

    def message_workstream(self, run: RunRef, launch_id: str, message: str) -> WorkstreamMessageAck:
        """See ``AsyncSpindleClient.message_workstream``."""
        return self._loop.run(self.aio.message_workstream(run, launch_id, message))

    def terminate_workstream(self, run: RunRef, launch_id: str) -> TerminateAck:
        """See ``AsyncSpindleClient.terminate_workstream``."""
        return self._loop.run(self.aio.terminate_workstream(run, launch_id))


async def _make_async(config: ClientConfig | None) -> AsyncSpindleClient:
    # Built on the private loop: httpx binds its connection pool to the loop it runs on.
    return AsyncSpindleClient(config)
