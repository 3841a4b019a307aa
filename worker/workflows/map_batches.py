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
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
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


def lanes(concurrency: int, plan: ItemPlan) -> tuple[int, int]:
    """(batches in flight, items in flight per batch): never over ``concurrency`` items."""
    batches = max(1, min(plan.pages, concurrency // max(plan.batch_size, 1)))
    return batches, max(1, min(plan.batch_size, concurrency // batches))


async def run_map(execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
    """Run a map node to its output ``{"items", "succeeded", "failed"}``.

    Raises:
        ActivityError: a plan, batch or collection failed after its retries
            (``over`` is no list, too many items failed: non-retryable).
        ApplicationError: ``InvalidParams`` when the map's own params are invalid.
    """
    node = execution.node
    params = validate_params(node, resolve_params(node, execution.state), MapParams)
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
    stateless = execution.model_copy(update={"state": {}})
    in_flight, per_batch = lanes(params.concurrency, plan)
    gate = asyncio.Semaphore(in_flight)

    async def batch(page: int) -> ItemBatchDone:
        async with gate:
            done: ItemBatchDone = await workflow.execute_activity(
                RUN_ITEM_BATCH,
                ItemBatch(
                    execution=stateless,
                    node=params.node,
                    page=page,
                    plan=plan,
                    concurrency=per_batch,
                ),
                result_type=ItemBatchDone,
                activity_id=f"{base_id}.batch.{page}",
                start_to_close_timeout=timeout,
                heartbeat_timeout=policies.ITEM_BATCH_HEARTBEAT,
                retry_policy=retry,
                task_queue=node.task_queue,
                priority=policies.node_priority(node),
            )
            return done

    batches = [asyncio.create_task(batch(page)) for page in range(plan.pages)]
    try:
        await asyncio.gather(*batches)
    except BaseException:
        for task in batches:
            task.cancel()
        raise
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
    elapsed_ms = (workflow.now() - started).total_seconds() * 1000
    return outcome.model_copy(
        update={"report": outcome.report.model_copy(update={"duration_ms": elapsed_ms})}
    )
