"""The activities of a ``map`` node: plan the items, run them in batches, collect them.

``plan_items`` evaluates ``over`` and stores the list (and the state the items'
templates read) in pages by reference (``spindle.shared.store.item_pages``);
``run_item_batch`` runs one page through the map's inline node, in this process,
at most ``concurrency`` items at once, stores each item's result or error and
posts one BATCH_PROGRESS; ``collect_items`` assembles the node's output in input
order. None of them carries an item through Temporal, except the collected
output (offloaded by the payload codec when large). See docs/graphs/node-types.md.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import orjson
from temporalio import activity
from temporalio.exceptions import ApplicationError

from spindle.shared.bus.message_bus import PostResult
from spindle.shared.contracts.errors import NodeFailed, to_application_error
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import NodeStatus
from spindle.shared.graphs.expressions import (
    EvaluationBudget,
    ExpressionBudgetSpent,
    ExpressionError,
    evaluate,
)
from spindle.shared.graphs.node_params import MapParams
from spindle.shared.platform import metrics
from spindle.shared.platform.logging_setup import bind_activity_log_context
from spindle.shared.platform.mongo import mongo_client
from spindle.shared.platform.settings import Settings
from spindle.shared.store.file_store import FileStore
from spindle.shared.store.item_pages import INPUT, RESULTS, STATE, ItemStore, items_key
from spindle.worker.activities.attachments import split_binary, store_binary
from spindle.worker.activities.call_replay import archive_with, recording_calls
from spindle.worker.activities.heartbeat import heartbeating
from spindle.worker.activities.item_agents import BatchUsage, ItemAgent, ItemAgentFailed
from spindle.worker.activities.nodes import as_node_result
from spindle.worker.activities.recorder import build_report, elapsed_ms_since, output_envelope
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.contracts import (
    COLLECT_ITEMS,
    PLAN_ITEMS,
    RUN_ITEM_BATCH,
    ItemBatch,
    ItemBatchDone,
    ItemCollection,
    ItemPlan,
    NodeExecution,
    NodeOutcome,
    RunRef,
)
from spindle.worker.contracts.param_resolution import (
    budget_spent,
    has_expressions,
    invalid_params,
    is_budget_spent,
    node_budget,
    off_loop,
    resolve_params,
    validate_params,
)
from spindle.worker.contracts.payload_schemas import item_problems
from spindle.worker.posting.poster import MessagePoster
from spindle.worker.registry import NodeContext, NodeType, get_node_type

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.llm.base import LlmProvider

Item = dict[str, Any]
AGENT_TYPE = "agent"  # the inline type that runs as an LLM loop per item (item_agents)
PAGE_IO = 8  # pages a plan writes, or a collection reads, at once
STATES_CACHED = 8  # maps running at once on one worker whose state stays in memory
# A page's later part writes as a later "attempt": first item * this + its attempt.
PART_ATTEMPTS = 1_000_000


def item_id(value: Any, index: int) -> str:
    """Seed 001's item id: the element's own ``id`` when it has one, else its position."""
    if isinstance(value, dict):
        own = value.get("id")
        if isinstance(own, str | int) and not isinstance(own, bool):
            return str(own)
    return str(index)


def error_text(exc: BaseException) -> str:
    """What a failed item records: a Temporal failure's message, else type and text."""
    if isinstance(exc, ApplicationError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


class _MutedPoster(MessagePoster):
    """The poster an item's node gets: its messages are dropped.

    Ten thousand items must not post ten thousand messages; the stream shows one
    BATCH_PROGRESS per batch instead (docs/design.md §10).
    """

    async def post(
        self,
        type: AgentMessageType,
        text: str | None = None,
        *,
        details: Any = None,
        final: bool | None = None,
    ) -> PostResult:
        return PostResult(seq=0, ts=0, duplicate=True, closed=False, raw=b"")


class ItemActivities(RunActivities):
    """The map activities, with their I/O dependencies injected.

    Args:
        bus: where progress is posted.
        archive: its database holds the item pages and attachments; without an
            archive they go to the settings' MongoDB all the same.
        settings: the worker's settings (batch size, MongoDB).
        llm: the model an ``agent`` per item asks (docs/graphs/items.md); None:
            such items fail, naming it.
    """

    def __init__(
        self,
        bus: MessageBus,
        archive: RunArchive | None = None,
        *,
        settings: Settings,
        llm: LlmProvider | None = None,
    ) -> None:
        super().__init__(bus, archive, settings=settings)
        self.llm = llm
        self._database: AsyncDatabase[dict[str, Any]] | None = (
            archive.database if archive is not None else None
        )
        self._items: ItemStore | None = None
        self._files: FileStore | None = None
        # The state a map's items read, by map execution: written once by its plan
        # and read by every batch, so a worker reads it once, not once per batch.
        self._states: OrderedDict[str, dict[str, Any]] = OrderedDict()

    async def _state(self, store: ItemStore, key: str) -> dict[str, Any]:
        state = self._states.get(key)
        if state is None:
            state = await store.get(key, STATE, 0)
            self._states[key] = state
            while len(self._states) > STATES_CACHED:
                self._states.popitem(last=False)
        return state

    async def _stores(self) -> tuple[ItemStore, FileStore]:
        if self._items is None or self._files is None:
            if self._database is None:
                settings = self.settings
                self._database = mongo_client(settings, appname="spindle-items")[settings.mongo_db]
            items = ItemStore(self._database)
            await items.ensure_indexes()
            self._items, self._files = items, FileStore(self._database)
        return self._items, self._files

    @activity.defn(name=PLAN_ITEMS)
    async def plan_items(self, execution: NodeExecution) -> ItemPlan:
        """Evaluate ``over``, store the list and the state in pages; return the counts.

        Raises:
            ApplicationError: ``InvalidParams`` when ``over`` fails or is no list.
        """
        node = execution.node
        bind_activity_log_context(node_id=node.id, node_type=node.type)
        # The map's one expression budget: its params and ``over`` here, then its
        # items' share each batch (docs/graphs/index.md#expression-limits).
        budget = node_budget(node.id, self.settings.expression_node_steps)
        params, values = await off_loop(_planned, node, execution.state, budget)
        if values is None:
            values = []  # nothing to map over (a missing key): an empty map, not an error
        if not isinstance(values, list):
            kind = type(values).__name__
            raise _bad_over(node, f"{params.over!r} yielded a {kind}, not a list")
        await self.tasks.node_started(execution)
        await self.recorder.node_started(execution)  # currentNodeId in the archive
        size = params.batch_size or self.settings.item_batch_size
        store, _ = await self._stores()
        key = _key(execution)
        attempt = activity.info().attempt
        await store.put(key, STATE, 0, execution.state, attempt=attempt)
        pages = (len(values) + size - 1) // size
        gate = asyncio.Semaphore(PAGE_IO)

        async def write(page: int) -> None:
            async with gate:
                chunk = values[page * size : (page + 1) * size]
                await store.put(key, INPUT, page, chunk, attempt=attempt)

        await asyncio.gather(*(write(page) for page in range(pages)))
        poster = self._poster(execution.run)
        # An UPDATE, not a BATCH_PROGRESS: clients count a batch's progress messages.
        await poster.post(
            AgentMessageType.UPDATE,
            f"{node.id}: {len(values)} items in {pages} batches",
            details={"node_id": node.id, "total": len(values), "batch_size": pages},
        )
        await poster.archive()
        return ItemPlan(
            total=len(values), pages=pages, batch_size=size, expression_steps=budget.remaining
        )

    @activity.defn(name=RUN_ITEM_BATCH)
    async def run_item_batch(self, batch: ItemBatch) -> ItemBatchDone:
        """Run one page of items through the inline node; store results, post progress."""
        execution = batch.execution
        node = execution.node
        bind_activity_log_context(node_id=node.id, node_type=node.type)
        store, files = await self._stores()
        key = _key(execution)
        state = await self._state(store, key)
        values = await store.get(key, INPUT, batch.page)
        # A page split at a budget cap runs in parts (docs/graphs/budgets.md).
        end = len(values) if batch.count is None else batch.first + batch.count
        values = values[batch.first : end]
        runner = _ItemRunner(batch, state, self.bus, files, self.settings.max_message_bytes)
        runner.expressions = _batch_budget(batch, len(values), self.settings.expression_node_steps)
        if batch.node.type == AGENT_TYPE and self.llm is not None:
            runner.agent = ItemAgent(self.llm, self.settings, execution.run, runner.node)
        with recording_calls(self.calls) as calls:  # its tool calls: recorded, or replayed
            ran = await _run_items(runner, batch, values)
        if runner.spent is not None:
            raise runner.spent  # the map's expression budget: the node fails, not an item
        metrics.tool_called(
            execution.run.tenant_id,
            execution.run.graph_name,
            len(ran) - calls.hits + runner.usage.tool_calls,  # recorded answers ran no tool
        )
        failed = sum(1 for result in ran if "error" in result)
        part_counts = {"succeeded": len(ran) - failed, "failed": failed}
        results = await _with_earlier_parts(store, key, batch, ran)
        failed = sum(1 for result in results if "error" in result)
        counts = {"succeeded": len(results) - failed, "failed": failed}
        # A later part of a page replaces the earlier parts' page (it holds them too).
        attempt = batch.first * PART_ATTEMPTS + activity.info().attempt
        await store.put(key, RESULTS, batch.page, results, attempt=attempt, counts=counts)
        # Progress over every batch stored so far: batches finish in any order.
        pages = await store.counts(key, RESULTS)
        done = sum(c.get("succeeded", 0) + c.get("failed", 0) for c in pages)
        failed_total = sum(c.get("failed", 0) for c in pages)
        total = batch.plan.total
        poster = self._poster(execution.run)
        await poster.post(
            AgentMessageType.BATCH_PROGRESS,
            f"{node.id}: {done}/{total} items done, {failed_total} failed",
            details={
                "node_id": node.id,
                "done": done,
                "failed": failed_total,
                "total": total,
                # What the clients' progress bars read (as for an agent's tool calls).
                "batch_index": batch.page + 1,
                "batch_size": batch.plan.pages,
            },
        )
        await archive_with(poster, self.recorder, *calls.ops)
        if runner.agent is None:
            return ItemBatchDone(**part_counts)
        # An agent per item: what its loops spent counts against the run's budget.
        return ItemBatchDone(
            **part_counts, llm=runner.usage.llm, tool_calls=runner.usage.tool_calls
        )

    @activity.defn(name=COLLECT_ITEMS)
    async def collect_items(self, collection: ItemCollection) -> NodeOutcome:
        """The map's output ``{"items", "succeeded", "failed"}`` in input order, and report.

        Raises:
            ApplicationError: ``NodeFailed`` (non-retryable) when more than
                ``max_failed_ratio`` of the items failed.
        """
        started = time.monotonic()
        execution = collection.execution
        node = execution.node
        bind_activity_log_context(node_id=node.id, node_type=node.type)
        store, _ = await self._stores()
        key = _key(execution)
        gate = asyncio.Semaphore(PAGE_IO)

        async def read(page: int) -> list[Item]:
            async with gate:
                results: list[Item] = await store.get(key, RESULTS, page)
                return results

        pages = await asyncio.gather(*(read(page) for page in range(collection.plan.pages)))
        items = [item for page in pages for item in page]
        failed = sum(1 for item in items if "error" in item)
        output = {"items": items, "succeeded": len(items) - failed, "failed": failed}
        total = len(items)
        ratio = failed / total if total else 0.0
        error = None
        if ratio > collection.max_failed_ratio:
            error = (
                f"{failed} of {total} items failed ({ratio:.0%}), more than "
                f"max_failed_ratio {collection.max_failed_ratio:g}"
            )
        status = NodeStatus.FAILED if error else NodeStatus.SUCCESS
        report = build_report(
            execution,
            status,
            # The map's whole time since it started (plan, batches, this collection),
            # as its live report says, not this activity's alone.
            duration_ms=elapsed_ms_since(execution.started_at)
            or (time.monotonic() - started) * 1000,
            output={"succeeded": total - failed, "failed": failed},
            error=error,
        )
        await self.recorder.save_report(
            execution,
            report,
            output=output_envelope(execution, None if error else output, error=error),
        )
        if error is not None:
            raise to_application_error(NodeFailed(f"node '{node.id}': {error}"))
        await self.tasks.node_finished(execution, output)
        return NodeOutcome(output=output, report=report)


class _ItemRunner:
    """Runs the inline node of one batch for one item at a time."""

    def __init__(
        self,
        batch: ItemBatch,
        state: dict[str, Any],
        bus: MessageBus,
        files: FileStore,
        max_message_bytes: int,
    ) -> None:
        execution = batch.execution
        self.run_ref: RunRef = execution.run
        self.map_id = execution.node.id
        self.visit = execution.visit
        self.state = state
        self.files = files
        self.node = NodeSpec(
            id=execution.node.id,
            type=batch.node.type,
            params=batch.node.params,
            inputs=batch.node.inputs,
        )
        self.poster = _MutedPoster(bus, execution.run, max_message_bytes=max_message_bytes)
        self._type: NodeType | None = None
        # An inline ``agent``: its per-item LLM loop and the batch's spend.
        self.agent: ItemAgent | None = None
        self.usage = BatchUsage()
        # Shared by every item of the batch (``_batch_budget``); ``spent`` holds the
        # failure once it ran out, which fails the batch and so the map.
        self.expressions = EvaluationBudget()
        self.spent: BaseException | None = None
        # The map's input_schema / output_schema hold per item (docs/graphs/index.md).
        self.schemas = (execution.node.input_schema, execution.node.output_schema)

    async def run(self, index: int, value: Any) -> Item:
        """The item: ``{"id", "data"}`` (and ``binary``), or ``{"id", "error"}``."""
        identifier = item_id(value, index)
        refused = item_problems(self.schemas[0], value, f"item {index} ('{identifier}') input")
        if refused is not None:
            return {"id": identifier, "error": {"message": refused, "nodeId": self.map_id}}
        scope = {**self.state, "item": value, "item_index": index}
        try:
            if self.node.type == AGENT_TYPE:
                return await self._agent_item(identifier, index, scope)
            node_type = self._type or get_node_type(self.node.type)
            self._type = node_type
            templates = node_type.templates
            if has_expressions(self.node, templates):
                raw = await off_loop(
                    resolve_params, self.node, scope, templates=templates, budget=self.expressions
                )
            else:
                raw = resolve_params(self.node, scope, templates=templates)
            params: Any = raw
            if node_type.params is not None:
                params = validate_params(self.node, raw, node_type.params)
            ctx = NodeContext(
                node=self.node,
                params=params,
                state=scope,
                run=self.run_ref,
                poster=self.poster,
                visit=self.visit,
                expressions=self.expressions,
            )
            result = as_node_result(await node_type.run(ctx), self.node.type)
            return await self._item(identifier, index, result.data)
        except Exception as exc:  # an item's failure is the item's, not the batch's
            if is_budget_spent(exc) and self.spent is None:
                self.spent = exc  # ... but the map's budget is the map's
            return {"id": identifier, "error": {"message": error_text(exc), "nodeId": self.map_id}}

    async def _agent_item(self, identifier: str, index: int, scope: dict[str, Any]) -> Item:
        """The item answered by its own agent loop (``item_agents``), with its usage."""
        if self.agent is None:
            raise NodeFailed("an agent per item needs the worker's LLM provider")
        try:
            answer, usage = await self.agent.answer(scope, self.expressions)
        except ItemAgentFailed as exc:
            self.usage.add(exc.usage)  # spent all the same
            error = {"message": str(exc), "nodeId": self.map_id}
            return {"id": identifier, "error": error, "usage": exc.usage.as_dict()}
        self.usage.add(usage)
        item = await self._item(identifier, index, answer)
        item["usage"] = usage.as_dict()
        return item

    async def _item(self, identifier: str, index: int, data: Any) -> Item:
        """The item; bytes in its data are stored as run files and referenced
        (``attachments``, docs/graphs/items.md#binary-data)."""
        data, blobs = split_binary(data)
        orjson.dumps(data)  # a result that is no JSON fails this item, not the batch
        refused = item_problems(self.schemas[1], data, f"item {index} ('{identifier}') output")
        if refused is not None:
            return {"id": identifier, "error": {"message": refused, "nodeId": self.map_id}}
        item: Item = {"id": identifier, "data": data}
        if blobs:
            item["binary"] = {name: await self._attach(index, name, b) for name, b in blobs.items()}
        return item

    async def _attach(self, index: int, name: str, content: bytes) -> dict[str, Any]:
        path = f"items/{self.map_id}/{self.visit}/{index}/{name}"
        return await store_binary(self.files, self.run_ref, path, content)


async def _with_earlier_parts(
    store: ItemStore, key: str, batch: ItemBatch, ran: list[Item]
) -> list[Item]:
    """A part's results after the page's earlier parts' (run before it, in order)."""
    if batch.first == 0:
        return ran
    earlier: list[Item] = await store.get(key, RESULTS, batch.page)
    # Only the items before this part: a retried part may find its own results there.
    return earlier[: batch.first] + ran


def _planned(
    node: NodeSpec, state: dict[str, Any], budget: EvaluationBudget
) -> tuple[MapParams, Any]:
    """The map's params and the value of its ``over``, against its expression budget."""
    params = validate_params(node, resolve_params(node, state, budget=budget), MapParams)
    try:
        return params, evaluate(params.over, state, budget=budget)
    except ExpressionBudgetSpent as exc:
        raise budget_spent(node.id, exc) from exc
    except ExpressionError as exc:
        raise _bad_over(node, str(exc)) from exc


def _batch_budget(batch: ItemBatch, items: int, node_steps: int) -> EvaluationBudget:
    """The share of the map's expression budget for ``items`` of its items: what its
    plan left, in proportion, so that all its batches together spend no more."""
    plan = batch.plan
    left = node_steps if plan.expression_steps is None else plan.expression_steps
    share = left * items // max(plan.total, 1)
    node_id = batch.execution.node.id
    owner = f"node '{node_id}' (its batch {batch.page + 1} of {plan.pages})"
    return node_budget(node_id, share, owner=owner)


async def _run_items(runner: _ItemRunner, batch: ItemBatch, values: list[Any]) -> list[Item]:
    """The batch's items, at most ``batch.concurrency`` at once, each counted in
    ``agent_items_queue_length`` from the batch's start until it is done."""
    first = batch.page * batch.plan.batch_size + batch.first
    gate = asyncio.Semaphore(batch.concurrency)
    left = len(values)
    metrics.items_queued(left)

    async def one(index: int, value: Any) -> Item:
        nonlocal left
        try:
            async with gate:
                return await runner.run(index, value)
        finally:
            left -= 1
            metrics.items_finished()

    try:
        async with heartbeating(f"{batch.execution.node.id} batch {batch.page + 1}"):
            return await asyncio.gather(*(one(first + i, v) for i, v in enumerate(values)))
    finally:
        metrics.items_finished(left)  # items never started (the batch failed or was cancelled)


def _key(execution: NodeExecution) -> str:
    run = execution.run
    return items_key(run.workflow_id, run.run_id, execution.node.id, execution.visit)


def _bad_over(node: NodeSpec, why: str) -> ApplicationError:
    return invalid_params(
        f"node '{node.id}': params.over: {why}",
        [{"node": node.id, "field": "params.over", "rule": "not_a_list"}],
    )


def item_activities(
    bus: MessageBus,
    archive: RunArchive | None,
    *,
    settings: Settings,
    llm: LlmProvider | None = None,
) -> list[Any]:
    """The map activities, bound to the bus, the archive's database, the settings and
    the LLM an agent per item asks."""
    items = ItemActivities(bus, archive, settings=settings, llm=llm)
    return [items.plan_items, items.run_item_batch, items.collect_items]
