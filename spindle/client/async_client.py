"""``AsyncSpindleClient``: the gateway's REST API from asyncio code.

::

    async with AsyncSpindleClient.from_env() as client:
        run = await client.start_run("approval-flow", input={"topic": "Q3 budget"})
        async for item in await client.stream(run):
            print(item.message.type.name, item.message.message)
            if item.type is AgentMessageType.REQUEST_INPUT:
                await client.send_input(run, data={"decision": "approve"})

Requests are not retried (a retried start would start a second run unless an
``idempotency_key`` is given); streams are, with backoff. A refused request
raises the ``ApiError`` of its status; an unreachable gateway ``ConnectionFailed``.
"""

from __future__ import annotations

import asyncio
import mimetypes
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from spindle.client.backoff import Random, Sleep
from spindle.client.config import ClientConfig
from spindle.client.conversation_calls import USER_INPUT_SIGNAL, ConversationCalls
from spindle.client.memory_calls import MemoryCalls
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
    run_ids,
)
from spindle.client.stream import AfterHistory, MessageCursor, MessageStream, run_path
from spindle.client.transport import segment
from spindle.client.workstream_calls import WorkstreamCalls
from spindle.shared.contracts.compare import RunComparison
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import SignalAck, UserInput


class AsyncSpindleClient(ConversationCalls, WorkstreamCalls, MemoryCalls):
    """A client of one Spindle gateway.

    Args:
        config: where the gateway is and the credentials (default: from the
            environment, see ``ClientConfig.from_env``).
        transport: an httpx transport to use instead of the network (tests).
    """

    @classmethod
    def from_env(cls, **overrides: Any) -> AsyncSpindleClient:
        """A client configured by ``SPINDLE_URL`` / ``SPINDLE_API_KEY`` / ``SPINDLE_TOKEN``
        (keyword arguments of ``ClientConfig`` win)."""
        return cls(ClientConfig.from_env(**overrides))

    # -- runs -------------------------------------------------------------------

    async def start_run(
        self,
        graph: str | None = None,
        *,
        input: Any = None,
        graph_spec: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> StartedRun:
        """Start a run of a registered graph (``graph``) or an inline ``graph_spec``.

        Args:
            graph: the registered graph's name.
            input: the run's input (checked against the graph's input schema).
            graph_spec: a whole graph definition instead of ``graph``.
            context: the run's shared context.
            meta: metadata propagated from node to node.
            idempotency_key: a retried start with the same key returns the same run.

        Raises:
            ValidationError: the graph or input is invalid (nothing was started).
            NotFoundError: no such graph.
        """
        body: dict[str, Any] = {"input": input}
        if graph is not None:
            body["graph"] = graph
        if graph_spec is not None:
            body["graph_spec"] = graph_spec
        if context is not None:
            body["context"] = context
        if meta is not None:
            body["meta"] = meta
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return await self._model(StartedRun, "POST", "/runs", json=body, headers=headers)

    async def list_runs(
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
        """The caller's tenant's runs, newest first, a page at a time.

        Args:
            status: only runs in this status.
            graph: only runs of this graph (exact name).
            limit: runs per page (at most 500).
            offset: runs to skip.
            forked_from: only forks of this run (its workflow id).
            id_contains: only runs whose workflow id contains this text (any case).
            conversation: only runs started with this ``conversation_id``.
            created_after: only runs created at or after this time (timezone-aware).
            created_before: only runs created before this time (timezone-aware).
        """
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        optional = {
            "status": status,
            "graph": graph,
            "forked_from": forked_from,
            "id": id_contains,
            "conversation": conversation,
            "created_after": created_after.isoformat() if created_after else None,
            "created_before": created_before.isoformat() if created_before else None,
        }
        params.update({key: value for key, value in optional.items() if value is not None})
        return await self._model(RunPage, "GET", "/runs", params=params)

    async def fork_run(
        self, run: RunRef, request: ForkRequest | None = None, **fields: Any
    ) -> StartedRun:
        """Fork a run (``POST /runs/{id}/fork``; docs/replay-and-compare.md).

        Args:
            run: the source run.
            request: what to change; or its fields as keyword arguments
                (``from_node``, ``state``, ``input``, ``graph``, ``version``,
                ``graph_spec``, ``overrides``, ``tools``, ``llm``, ``on_miss``).
                Neither: a whole live replay with the source's graph.

        Raises:
            ValidationError: an unknown node, an invalid candidate graph or input.
            ConflictError: nothing recorded to reuse, or not the graph version asked for.
        """
        workflow_id, _ = run_ids(run)
        body = request or ForkRequest.model_validate(fields)
        return await self._model(
            StartedRun,
            "POST",
            f"/runs/{segment(workflow_id)}/fork",
            json=body.model_dump(mode="json", exclude_unset=True),
        )

    async def compare_runs(self, a: RunRef, b: RunRef) -> RunComparison:
        """Compare two related runs (``GET /runs/{a}/compare/{b}``).

        Raises:
            ConflictError: the runs are of unrelated graphs.
            NotFoundError: either run is unknown to the caller.
        """
        first, _ = run_ids(a)
        second, _ = run_ids(b)
        path = f"/runs/{segment(first)}/compare/{segment(second)}"
        return await self._model(RunComparison, "GET", path)

    async def register_graph(self, spec: GraphSpec | dict[str, Any]) -> GraphSpec:
        """Register or replace a graph (``PUT /graphs/{name}``; docs/graphs/builder.md).

        Args:
            spec: the graph, as a ``GraphSpec`` (e.g. ``spindle.graphs.Graph.build()``)
                or a plain document with a ``name``.

        Raises:
            ValidationError: the gateway refused the graph, naming every fault.
            ForbiddenError: the caller has no role in ``graph_write_roles``.
        """
        document = (
            spec.model_dump(mode="json", by_alias=True, exclude_none=True)
            if isinstance(spec, GraphSpec)
            else dict(spec)
        )
        name = str(document.get("name", ""))
        return await self._model(GraphSpec, "PUT", f"/graphs/{segment(name)}", json=document)

    async def get_run(self, run: RunRef) -> RunInfo:
        """Describe a run: status, current nodes, pending input, node reports."""
        workflow_id, _ = run_ids(run)
        return await self._model(RunInfo, "GET", f"/runs/{segment(workflow_id)}")

    async def bundle(self, run: RunRef) -> RunBundle:
        """Everything about a run in one document: its description, stored messages,
        archived node reports (with inputs and outputs), Temporal history and trace.

        The history comes whole: a long run makes a bundle of megabytes.

        Raises:
            NotFoundError: no such run (or another tenant's).
        """
        workflow_id, _ = run_ids(run)
        return await self._model(RunBundle, "GET", f"/runs/{segment(workflow_id)}/bundle")

    async def cancel_run(self, run: RunRef, reason: str | None = None) -> Accepted:
        """Ask a run to stop; its stream then ends with TERMINATED."""
        workflow_id, _ = run_ids(run)
        body = {"reason": reason} if reason else None
        return await self._model(
            Accepted, "POST", f"/runs/{segment(workflow_id)}/cancel", json=body
        )

    async def terminate_run(self, run: RunRef, reason: str | None = None) -> Accepted:
        """Terminate a run at once (no clean-up in the run)."""
        workflow_id, _ = run_ids(run)
        body = {"reason": reason} if reason else None
        return await self._model(
            Accepted, "POST", f"/runs/{segment(workflow_id)}/terminate", json=body
        )

    # -- messages ---------------------------------------------------------------

    async def history(self, run: RunRef, *, since: int | None = None) -> list[StreamedMessage]:
        """The run's stored messages (phase 1 alone), optionally only ``ts > since``."""
        workflow_id, run_id = await self._run_id(run)
        params = {"since": since} if since is not None else None
        reply = await self._request("GET", run_path(workflow_id, run_id, "updates"), params=params)
        cursor = MessageCursor(run_id)
        raw = orjson.loads(reply.content).get("messages", [])
        kept = (cursor.accept(item, seq=None, replayed=True) for item in raw)
        return [message for message in kept if message is not None]

    async def stream(
        self,
        run: RunRef,
        *,
        after_history: AfterHistory | None = None,
        sleep: Sleep | None = None,
        rand: Random | None = None,
    ) -> MessageStream:
        """The run's messages, history then live, each once, until the conversation ends.

        Iterate the result with ``async for``. Reconnection follows
        ``config.backoff``.

        Args:
            run: the run.
            after_history: awaited between the two phases with the history.
            sleep: replaces ``asyncio.sleep`` in backoff waits (tests).
            rand: replaces ``random.random`` in backoff jitter (tests).
        """
        workflow_id, run_id = await self._run_id(run)
        return MessageStream(
            self._http,
            workflow_id,
            run_id,
            policy=self.config.backoff,
            read_timeout=self.config.stream_read_timeout,
            after_history=after_history,
            sleep=sleep,
            rand=rand,
        )

    async def stream_token(self, run: RunRef) -> StreamToken:
        """A short-lived read-only token for the run's stream (for ``EventSource``)."""
        workflow_id, _ = run_ids(run)
        return await self._model(StreamToken, "POST", f"/runs/{segment(workflow_id)}/stream-token")

    # -- signals and files --------------------------------------------------------

    async def signal(self, run: RunRef, name: str, body: BaseModel | dict[str, Any]) -> SignalAck:
        """Send a named signal with a JSON body (``UserInput`` is the one runs take)."""
        workflow_id, run_id = run_ids(run)
        payload = (
            body.model_dump(mode="json", exclude_none=True) if isinstance(body, BaseModel) else body
        )
        path = run_path(workflow_id, run_id, f"signal/{segment(name)}")
        return await self._model(SignalAck, "POST", path, json=payload)

    async def send_input(
        self,
        run: RunRef,
        message: str | None = None,
        *,
        data: dict[str, Any] | None = None,
        node_id: str | None = None,
        client_message_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SignalAck:
        """Answer a prompt, or send the run a message (the ``UserInput`` signal).

        Args:
            run: the run.
            message: text; alone it fills a prompt whose schema asks one string.
            data: the structured answer, as the prompt's ``ui_schema`` describes it.
            node_id: the prompt answered (default: the one pending).
            client_message_id: makes a retried send idempotent (default: a new id).
            metadata: free-form context for the run.

        Raises:
            ValidationError: the answer breaks the prompt's schema (``errors`` names
                each field); the run keeps waiting.
            ConflictError: no prompt is waiting, or the run has finished.
        """
        user_input = UserInput(
            message=message,
            data=data,
            node_id=node_id,
            metadata=metadata,
            client_message_id=client_message_id or f"py-{uuid.uuid4().hex}",
        )
        return await self.signal(run, USER_INPUT_SIGNAL, user_input)

    async def upload_file(
        self,
        run: RunRef,
        file: str | Path | bytes,
        *,
        name: str | None = None,
        content_type: str | None = None,
    ) -> UploadedFile:
        """Upload a file to the run (the same name again replaces it).

        Args:
            run: the run.
            file: a path, or the bytes themselves (then ``name`` is required).
            name: the stored name (default: the file's name).
            content_type: default: guessed from the name.
        """
        if isinstance(file, bytes):
            if not name:
                raise ValueError("uploading bytes needs a name")
            content = file
        else:
            path = Path(file)
            content = await asyncio.to_thread(path.read_bytes)
            name = name or path.name
        kind = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        workflow_id, run_id = run_ids(run)
        return await self._model(
            UploadedFile,
            "POST",
            run_path(workflow_id, run_id, "files"),
            files={"file": (name, content, kind)},
        )

    async def list_files(self, run: RunRef) -> list[UploadedFile]:
        """The run's files (uploads and merged workstream artifacts)."""
        workflow_id, run_id = run_ids(run)
        reply = await self._request("GET", run_path(workflow_id, run_id, "files"))
        return [UploadedFile.model_validate(f) for f in orjson.loads(reply.content)["files"]]

    async def download_file(self, run: RunRef, name: str) -> bytes:
        """One file's bytes; ``name`` may be an artifact path like ``files/ws-1/result.md``."""
        workflow_id, run_id = run_ids(run)
        reply = await self._request("GET", run_path(workflow_id, run_id, f"files/{segment(name)}"))
        return reply.content

    # -- workstreams --------------------------------------------------------------
