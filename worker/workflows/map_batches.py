"""Running a ``map`` node from the workflow: plan, batches, collect.

Pure orchestration (no I/O): ``plan_items`` stores the list in pages and returns
its size, one ``run_item_batch`` activity per page runs the items (at most
``concurrency`` items in flight over all batches), ``collect_items`` assembles the
output. History grows by a constant per batch, never per item: no item and no
copy of the state travels in a batch's input or result (docs/graphs/node-types.md).

Batches rather than child workflows: a batch is one activity of constant cost,
and its items run in-process on the worker (a tool call per item costs far less
than an activity), so 10,000 items are 50 batches of 200 and about 200 history
events. Continue-as-new is not needed inside a map: the run continues as new at
node boundaries (docs/design.md §10).

Budgets (docs/graphs/budgets.md): every item is one tool call, counted as its
batch is dispatched (``ItemMeter.take_tools``). At the tool-call cap a page is
split: the items that fit run, the rest wait (the run pauses) and run after a
raise as the page's next part (``ItemBatch.first``, activity id
``<node>.<visit>.batch.<page>.<first>``); items done are never rerun. A meter
not at a cap admits whole pages at once: the same activities as always. An
``agent`` per item also spends tokens and makes tool calls in its loop: each
batch reports its items' spend (``ItemBatchDone.llm``/``tool_calls``), which the
meter counts when the batch is done (docs/graphs/items.md#an-agent-per-item).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import TurnUsage
    from spindle.shared.graphs.node_params import MapParams
    from spindle.shared.graphs.node_types import NodeTypeSpec
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
        policies,
    )
    from spindle.worker.contracts.param_resolution import resolve_params, validate_params
    from spindle.worker.workflows.expression_budget import task_budget


class ItemMeter(Protocol):
    """Admits a map's items against the run's budget (``BudgetMeter``)."""

    async def take_tools(self, wanted: int = 1) -> int:
        """Admit and count 1 to ``wanted`` items, waiting (or failing) at a cap."""
        ...

    def llm_used(self, usage: TurnUsage | None) -> None:
        """Count LLM tokens and cost (an agent per item's)."""
        ...

    def tools_used(self, count: int = 1) -> None:
        """Count tool calls (an agent per item's)."""
        ...


def page_size(plan: ItemPlan, page: int) -> int:
    """How many items page ``page`` holds (the last one may be short)."""
    return max(0, min(plan.batch_size, plan.total - page * plan.batch_size))


def lanes(concurrency: int, plan: ItemPlan) -> tuple[int, int]:
    """(batches in flight, items in flight per batch): never over ``concurrency`` items."""
    batches = max(1, min(plan.pages, concurrency // max(plan.batch_size, 1)))
    return batches, max(1, min(plan.batch_size, concurrency // batches))


@dataclass
class _Pages:
    """Dispatches a map's pages as batches, each admitted (in parts) by the meter."""

    stateless: NodeExecution
    params: MapParams
    plan: ItemPlan
    meter: ItemMeter | None
    timeout: timedelta
    retry: RetryPolicy

    async def run_all(self) -> None:
        in_flight, self._per_batch = lanes(self.params.concurrency, self.plan)
        self._gate = asyncio.Semaphore(in_flight)
        batches = [asyncio.create_task(self._batch(page)) for page in range(self.plan.pages)]
        try:
            await asyncio.gather(*batches)
        except BaseException:
            for task in batches:
                task.cancel()
            raise

    async def _batch(self, page: int) -> None:
        async with self._gate:
            size, first = page_size(self.plan, page), 0
            while first < size:
                # Counted before the part starts; waits (the run pauses) or fails at the cap.
                wanted = size - first
                count = wanted if self.meter is None else await self.meter.take_tools(wanted)
                await self._part(page, first, count)
                first += count

    async def _part(self, page: int, first: int, count: int) -> None:
        node = self.stateless.node
        whole = first == 0 and count == page_size(self.plan, page)
        done: ItemBatchDone = await workflow.execute_activity(
            RUN_ITEM_BATCH,
            ItemBatch(
                execution=self.stateless,
                node=self.params.node,
                page=page,
                plan=self.plan,
                concurrency=self._per_batch,
                first=first,
                count=None if whole else count,
            ),
            result_type=ItemBatchDone,
            # A whole page keeps the id it always had; a part is named by its first item.
            activity_id=f"{node.id}.{self.stateless.visit}.batch.{page}"
            + ("" if whole else f".{first}"),
            start_to_close_timeout=self.timeout,
            heartbeat_timeout=policies.ITEM_BATCH_HEARTBEAT,
            retry_policy=self.retry,
            task_queue=node.task_queue,
            priority=policies.node_priority(node),
        )
        # Only an agent per item reports spend (never in a history recorded before it).
        if self.meter is not None and (done.llm is not None or done.tool_calls):
            self.meter.llm_used(done.llm)
            self.meter.tools_used(done.tool_calls)


async def run_map(
    execution: NodeExecution, spec: NodeTypeSpec | None, *, meter: ItemMeter | None = None
) -> NodeOutcome:
    """Run a map node to its output ``{"items", "succeeded", "failed"}``.

    Args:
        execution: the map node and the state it reads.
        spec: the node type's spec (timeouts, retries).
        meter: admits the items against the run's budget as they are dispatched.

    Raises:
        ActivityError: a plan, batch or collection failed after its retries
            (``over`` is no list, too many items failed: non-retryable).
        ApplicationError: ``InvalidParams`` when the map's own params are invalid.
    """
    node = execution.node
    raw = resolve_params(node, execution.state, budget=task_budget())
    params = validate_params(node, raw, MapParams)
    timeout = policies.node_timeout(node, spec)
    retry = policies.node_retry(node, policies.type_retry(spec))
    base_id = f"{node.id}.{execution.visit}"
    plan: ItemPlan = await workflow.execute_activity(
        PLAN_ITEMS,
        execution,
        result_type=ItemPlan,
        activity_id=f"{base_id}.plan",
        start_to_close_timeout=timeout,
        retry_policy=retry,
        task_queue=node.task_queue,
        priority=policies.node_priority(node),
    )
    pages = _Pages(execution.model_copy(update={"state": {}}), params, plan, meter, timeout, retry)
    await pages.run_all()
    # The collection reports the node to its task (seed 003), which ``meta`` names.
    collecting = execution.model_copy(update={"state": {"meta": execution.state.get("meta", {})}})
    outcome: NodeOutcome = await workflow.execute_activity(
        COLLECT_ITEMS,
        ItemCollection(execution=collecting, plan=plan, max_failed_ratio=params.max_failed_ratio),
        result_type=NodeOutcome,
        activity_id=f"{base_id}.collect",
        start_to_close_timeout=timeout,
        retry_policy=retry,
        task_queue=node.task_queue,
        priority=policies.node_priority(node),
    )
    started = datetime.fromisoformat(execution.started_at)
    # The collection measured the map's whole time (since execution.started_at) in
    # the report it archived: the live report says the same (docs/graphs/long-runs.md).
    elapsed_ms = outcome.report.duration_ms or (workflow.now() - started).total_seconds() * 1000
    return outcome.model_copy(
        update={"report": outcome.report.model_copy(update={"duration_ms": elapsed_ms})}
    )
