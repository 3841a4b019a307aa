"""``Evaluation``: a candidate forked over many recorded runs, compared and checked.

For each source run (``EvaluationInput.total`` of them, indexed in MongoDB by
``spindle.shared.store.evaluations``) the workflow asks ``evaluation_fork`` to admit
(run-start permit), build and record the fork, starts it as a child ``GraphRun``,
waits for it, and asks ``evaluation_compare`` to compare it with its source, run the
JMESPath checks and store the entry. A check with a scoring ``graph`` runs that graph
as one more child per run, with ``{source, candidate}`` as its input.

History stays bounded by **continue-as-new after every page** of
``evaluation_page_size`` runs: a generation's history holds one page (about 25
events per run, fewer when runs end together), whatever the evaluation's
size. Continue-as-new rather than a child workflow per page keeps one workflow id
for the whole evaluation, so ``POST /evaluations/{id}/cancel`` and the status
address one workflow, and a page's forks are that workflow's own children: a
cancel reaches them (``ParentClosePolicy.REQUEST_CANCEL`` too, should the
evaluation be terminated). Nothing accumulates in workflow state: results are in
MongoDB, the input carries only where the next page starts
(docs/replay-and-compare.md#evaluations).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.evaluations import (
        EVALUATION_COMPARE,
        EVALUATION_FINISH,
        EVALUATION_FORK,
        EVALUATION_PAGE,
        EVALUATION_SCORES,
        EVALUATION_WORKFLOW,
        CheckResult,
        CompareDone,
        EvaluationFinish,
        EvaluationInput,
        EvaluationPage,
        EvaluationPageRequest,
        EvaluationResult,
        EvaluationStatus,
        ForkCompare,
        ForkPrepared,
        ForkStart,
        PageRun,
    )
    from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput
    from spindle.worker.contracts import policies

# The run's search attributes, as the gateway's starts set them (gateway/runs/temporal.py).
_TENANT_KEY = SearchAttributeKey.for_keyword("SpindleTenant")
_GRAPH_KEY = SearchAttributeKey.for_keyword("SpindleGraph")


@workflow.defn(name=EVALUATION_WORKFLOW)
class Evaluation:
    """See the module docstring."""

    @workflow.run
    async def run(self, params: EvaluationInput) -> EvaluationResult:
        """Evaluate the runs from ``params.next_index`` on, a page per generation."""
        try:
            first = params.next_index
            if first < params.total:
                await self._page(params, first)
                following = first + params.page_size
                if following < params.total:
                    workflow.continue_as_new(params.model_copy(update={"next_index": following}))
            return await self._finish(params, "completed")
        except asyncio.CancelledError:
            # The cancel already reached the page's forks (awaited children); say so
            # on the evaluation and its stream, then end cancelled.
            await asyncio.shield(asyncio.ensure_future(self._finish(params, "cancelled")))
            raise

    async def _finish(self, params: EvaluationInput, status: EvaluationStatus) -> EvaluationResult:
        result: EvaluationResult = await workflow.execute_activity(
            EVALUATION_FINISH,
            EvaluationFinish(
                evaluation_id=params.evaluation_id, tenant_id=params.tenant_id, status=status
            ),
            start_to_close_timeout=policies.EVALUATION_START_TO_CLOSE,
            heartbeat_timeout=policies.EVALUATION_HEARTBEAT,
            retry_policy=policies.EVALUATION_RETRY,
            result_type=EvaluationResult,
        )
        return result

    async def _page(self, params: EvaluationInput, first: int) -> None:
        page = await workflow.execute_activity(
            EVALUATION_PAGE,
            EvaluationPageRequest(
                evaluation_id=params.evaluation_id, first=first, size=params.page_size
            ),
            start_to_close_timeout=policies.EVALUATION_START_TO_CLOSE,
            heartbeat_timeout=policies.EVALUATION_HEARTBEAT,
            retry_policy=policies.EVALUATION_RETRY,
            result_type=EvaluationPage,
        )
        slots = asyncio.Semaphore(params.concurrency)
        await asyncio.gather(*(self._one(params, run, slots) for run in page.runs))

    async def _one(self, params: EvaluationInput, run: PageRun, slots: asyncio.Semaphore) -> None:
        async with slots:
            start = ForkStart(
                evaluation_id=params.evaluation_id,
                tenant_id=params.tenant_id,
                user_id=params.user_id,
                index=run.index,
                workflow_id="",
                source_id=run.source_id,
                fork=params.fork,
            )
            fork_id, prepared = await self._prepared(start)
            compare = ForkCompare(
                evaluation_id=params.evaluation_id,
                tenant_id=params.tenant_id,
                index=run.index,
                source_id=run.source_id,
                checks=params.checks,
                total=params.total,
                error=prepared.error,
            )
            if prepared.run_input is not None:
                run_id = await self._child(fork_id, prepared.run_input, params)
                compare = compare.model_copy(update={"fork_id": fork_id, "fork_run_id": run_id})
            done = await workflow.execute_activity(
                EVALUATION_COMPARE,
                compare,
                start_to_close_timeout=policies.EVALUATION_START_TO_CLOSE,
                heartbeat_timeout=policies.EVALUATION_HEARTBEAT,
                retry_policy=policies.EVALUATION_RETRY,
                result_type=CompareDone,
            )
            if done.check_input is not None:
                await self._scores(params, compare, done)

    async def _prepared(self, start: ForkStart) -> tuple[str, ForkPrepared]:
        """Admit and build one run; over the tenant's run-start limit, wait and ask again
        (with a new run id: a refused id stays refused)."""
        while True:
            workflow_id = f"run-{workflow.uuid4().hex}"
            prepared = await workflow.execute_activity(
                EVALUATION_FORK,
                start.model_copy(update={"workflow_id": workflow_id}),
                start_to_close_timeout=policies.EVALUATION_START_TO_CLOSE,
                heartbeat_timeout=policies.EVALUATION_HEARTBEAT,
                retry_policy=policies.EVALUATION_RETRY,
                result_type=ForkPrepared,
            )
            if prepared.retry_after is None:
                return workflow_id, prepared
            await workflow.sleep(timedelta(seconds=prepared.retry_after))

    async def _child(
        self, workflow_id: str, run_input: GraphRunInput, params: EvaluationInput
    ) -> str:
        """Start ``run_input`` as a child run and wait for its end; its Temporal run id.

        A run that fails or is cancelled ends here too: its document says how.
        """
        handle = await workflow.start_child_workflow(
            GRAPH_RUN_WORKFLOW,
            run_input,
            id=workflow_id,
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            memo={
                "graph": run_input.graph.name,
                "tenant": run_input.tenant_id,
                "user": run_input.user_id,
            },
            search_attributes=(
                TypedSearchAttributes(
                    [
                        SearchAttributePair(_TENANT_KEY, run_input.tenant_id),
                        SearchAttributePair(_GRAPH_KEY, run_input.graph.name),
                    ]
                )
                if params.search_attributes
                else None
            ),
            static_summary=f"graph {run_input.graph.name}",
        )
        with contextlib.suppress(ChildWorkflowError):
            await handle
        return handle.first_execution_run_id or ""

    async def _scores(
        self, params: EvaluationInput, compare: ForkCompare, done: CompareDone
    ) -> None:
        """Run each scoring graph as a child with ``{source, candidate}``; store the results."""
        results: dict[str, CheckResult] = {}
        for check in params.checks:
            if check.graph is None:
                continue
            start = ForkStart(
                evaluation_id=params.evaluation_id,
                tenant_id=params.tenant_id,
                user_id=params.user_id,
                index=compare.index,
                workflow_id="",
                scoring_graph=check.graph,
                scoring_input=done.check_input,
            )
            run_id, prepared = await self._prepared(start)
            if prepared.run_input is None:
                results[check.name] = CheckResult(passed=False, error=prepared.error)
                continue
            await self._child(run_id, prepared.run_input, params)
            results[check.name] = CheckResult(passed=False, run_id=run_id)
        await workflow.execute_activity(
            EVALUATION_SCORES,
            compare.model_copy(update={"scores": results}),
            start_to_close_timeout=policies.EVALUATION_START_TO_CLOSE,
            heartbeat_timeout=policies.EVALUATION_HEARTBEAT,
            retry_policy=policies.EVALUATION_RETRY,
            result_type=CompareDone,
        )
