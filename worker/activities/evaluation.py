"""The ``Evaluation`` workflow's activities (docs/replay-and-compare.md#evaluations).

- ``evaluation_page``: the page's source runs not finished yet (from MongoDB).
- ``evaluation_fork``: takes the fork's run-start permit (the tenant's
  ``rate_limit_run_starts``, idempotent per fork id: ``RunStartPermits``), builds its
  ``GraphRunInput`` with the fork path's own code (``shared.graphs.forks``: the
  source's recorded start from Temporal, its archived node reports), and writes the
  run document and stream metadata as a gateway start does; the workflow starts the
  run as its child. A scoring graph's run (a check) is prepared the same way.
- ``evaluation_compare``: compares the fork with its source (the pure core,
  ``shared.graphs.run_compare``), evaluates the JMESPath checks, stores the entry and
  posts BATCH_PROGRESS on the evaluation's stream.
- ``evaluation_scores``: stores a run's scoring-graph results.
- ``evaluation_finish``: the evaluation's status, and its stream's last message.

Each run's compare side is read from the archive (its run document: status, output,
spend from its budget; its node reports): the gateway's compare reads the stored
messages for per-node tokens too, which an evaluation does not need per run.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.compare import CompareSide, NodeUsage, RunComparison, Totals
from spindle.shared.contracts.errors import NotFound, SpindleError
from spindle.shared.contracts.evaluations import (
    EVALUATION_COMPARE,
    EVALUATION_FINISH,
    EVALUATION_FORK,
    EVALUATION_PAGE,
    EVALUATION_SCORES,
    CheckResult,
    CompareDone,
    EvaluationCheck,
    EvaluationFinish,
    EvaluationPage,
    EvaluationPageRequest,
    EvaluationResult,
    ForkCompare,
    ForkPrepared,
    ForkStart,
    RunOutcome,
    SpendTotals,
)
from spindle.shared.contracts.forks import ForkRequest, ReplaySource
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import ENDED_STATUSES, GraphRunInput, RunStatus
from spindle.shared.graphs.expressions import ExpressionError, evaluate, is_truthy
from spindle.shared.graphs.forks import build_fork_input, recorded_outputs
from spindle.shared.graphs.run_compare import compare_runs, relation
from spindle.shared.platform.run_start_permits import RunStartPermits
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.evaluations import EvaluationStore
from spindle.shared.store.run_document import RunRecord
from spindle.shared.temporal.run_inputs import recorded_start_input
from spindle.worker.activities.heartbeat import heartbeating
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.archive.writes import attached_outbox
from spindle.worker.contracts import RunRef

#: The graph name an evaluation's stream metadata carries.
EVALUATION_STREAM_GRAPH = "evaluation"


def check_document(comparison: RunComparison) -> dict[str, Any]:
    """What a check reads: ``{source: {output, totals}, candidate: {output, totals}}``."""
    return {
        "source": {
            "output": comparison.output.a,
            "totals": comparison.totals["a"].model_dump(mode="json"),
        },
        "candidate": {
            "output": comparison.output.b,
            "totals": comparison.totals["b"].model_dump(mode="json"),
        },
    }


def expression_checks(
    checks: list[EvaluationCheck], document: dict[str, Any]
) -> dict[str, CheckResult]:
    """Each ``expr`` check's result over ``document`` (an error fails the check)."""
    results: dict[str, CheckResult] = {}
    for check in checks:
        if check.expr is None:
            continue
        try:
            value = evaluate(check.expr, document)
        except ExpressionError as exc:
            results[check.name] = CheckResult(passed=False, error=str(exc))
            continue
        results[check.name] = CheckResult(passed=is_truthy(value), value=value)
    return results


def scored(output: Any, status: str | None, run_id: str) -> CheckResult:
    """A scoring graph's result: passed when its run completed with an output that is
    an object with ``passed: true``, or (not an object) truthy."""
    if status != RunStatus.COMPLETED.value:
        return CheckResult(passed=False, run_id=run_id, error=f"scoring run ended {status}")
    passed = output.get("passed") is True if isinstance(output, dict) else is_truthy(output)
    return CheckResult(passed=passed, value=output, run_id=run_id)


def _spend(totals: Totals) -> SpendTotals:
    return SpendTotals(
        tokens=totals.tokens,
        cost=totals.cost,
        tool_calls=totals.tool_calls,
        duration_ms=totals.duration_ms,
    )


async def compare_side(archive: RunArchive, workflow_id: str) -> CompareSide:
    """One run as the compare core reads it, from the archive alone.

    Raises:
        NotFound: the run has no document.
    """
    record = await archive.get_run(workflow_id)
    if record is None:
        raise NotFound(f"run '{workflow_id}' was not found")
    usage = NodeUsage()
    if record.budget is not None:
        spent = record.budget.get("usage") or {}
        usage = NodeUsage(
            tokens=int(spent.get("llm_tokens") or 0),
            cost=float(spent.get("cost_usd") or 0.0),
            tool_calls=int(spent.get("tool_calls") or 0),
        )
    duration = (record.updated_at - record.created_at).total_seconds() * 1000
    return CompareSide(
        workflow_id=workflow_id,
        graph_name=record.graph_name,
        status=record.status,
        output=record.output,
        reports=await archive.node_reports(workflow_id),
        total_usage=usage,
        duration_ms=max(duration, 0.0),
        forked_from=(
            ReplaySource.model_validate(record.forked_from)
            if record.forked_from is not None
            else None
        ),
    )


_Self = TypeVar("_Self")
_Request = TypeVar("_Request")
_Result = TypeVar("_Result")


def _heartbeating(
    method: Callable[[_Self, _Request], Awaitable[_Result]],
) -> Callable[[_Self, _Request], Awaitable[_Result]]:
    """Heartbeat while the activity runs (``EVALUATION_HEARTBEAT``): an attempt lost
    with its worker is retried within seconds, not after its start-to-close timeout."""

    @functools.wraps(method)
    async def beating(self: _Self, request: _Request) -> _Result:
        async with heartbeating(EVALUATION_STREAM_GRAPH):
            return await method(self, request)

    return beating


class EvaluationActivities(RunActivities):
    """The evaluation's activities, with the bus, archive and settings injected."""

    @cached_property
    def permits(self) -> RunStartPermits:
        return RunStartPermits(self.bus.redis)

    @property
    def _archive(self) -> RunArchive:
        if self.archive is None:
            raise RuntimeError("evaluations need the archive (MongoDB)")
        return self.archive

    @cached_property
    def store(self) -> EvaluationStore:
        return EvaluationStore(self._archive.database)

    @activity.defn(name=EVALUATION_PAGE)
    @_heartbeating
    async def evaluation_page(self, request: EvaluationPageRequest) -> EvaluationPage:
        """The runs of one page not finished yet."""
        runs = await self.store.page(request.evaluation_id, request.first, request.size)
        return EvaluationPage(runs=runs)

    @activity.defn(name=EVALUATION_FORK)
    @_heartbeating
    async def evaluation_fork(self, start: ForkStart) -> ForkPrepared:
        """Admit, build and record one run to start (see the module docstring)."""
        per_minute = self.settings.rate_limit_run_starts
        decision = await self.permits.take_scheduled(
            start.tenant_id,
            f"evaluation:{start.evaluation_id}",
            start.workflow_id,
            per_minute=per_minute,
        )
        if not decision.allowed:
            return ForkPrepared(retry_after=max(decision.retry_after, 0.1))
        try:
            run_input = await self._run_input(start)
        except SpindleError as exc:
            if start.source_id is not None:
                await self.store.update_entry(
                    start.evaluation_id, start.index, outcome="failed", error=exc.detail
                )
            return ForkPrepared(error=exc.detail)
        settings = self.settings
        run_input = run_input.model_copy(
            update={
                "max_live_workstreams": settings.max_live_workstreams,
                "expression_workflow_task_steps": settings.expression_workflow_task_steps,
                "max_node_visits": settings.max_node_visits,
                "shared_state_max_bytes": settings.shared_state_max_bytes,
            }
        )
        await self._record(run_input, start.workflow_id)
        if start.source_id is not None:
            await self.store.update_entry(
                start.evaluation_id, start.index, fork_id=start.workflow_id, outcome="running"
            )
        return ForkPrepared(run_input=run_input)

    async def _run_input(self, start: ForkStart) -> GraphRunInput:
        archive = self._archive
        if start.scoring_graph is not None:
            spec = await archive.get_graph(start.scoring_graph, tenant_id=start.tenant_id)
            if spec is None:
                raise NotFound(f"scoring graph '{start.scoring_graph}' is not registered")
            return GraphRunInput(
                graph=spec,
                input=start.scoring_input,
                tenant_id=start.tenant_id,
                user_id=start.user_id,
            )
        assert start.source_id is not None and start.fork is not None
        source = await recorded_start_input(activity.client(), start.source_id)
        if source.tenant_id != start.tenant_id:
            raise NotFound(f"run '{start.source_id}' was not found")
        given = start.fork.graph_spec
        candidate = GraphSpec.model_validate(given) if given is not None else None
        reports = await archive.node_reports(start.source_id)
        # An evaluation never changes the input; a decoded request would have its
        # ``input: null`` as set (``build_fork_input`` reads what was set).
        fork = ForkRequest.model_validate(start.fork.model_dump(exclude={"input"}))
        return build_fork_input(
            source,
            recorded_outputs(reports),
            fork,
            source_workflow_id=start.source_id,
            candidate=candidate,
            tenant_id=start.tenant_id,
            user_id=start.user_id,
        )

    async def _record(self, run_input: GraphRunInput, workflow_id: str) -> None:
        """The run document and stream metadata a gateway start writes (the run id is
        filled in when the evaluation compares the run)."""
        now = datetime.now(UTC)
        settings = self.settings
        base = settings.temporal_ui_url.rstrip("/")
        await self._archive.create_run(
            RunRecord(
                workflow_id=workflow_id,
                run_id="",
                tenant_id=run_input.tenant_id,
                user_id=run_input.user_id,
                graph_name=run_input.graph.name,
                status=RunStatus.RUNNING,
                input=run_input.input,
                context=run_input.context,
                created_at=now,
                updated_at=now,
                temporal_ui_url=(
                    f"{base}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id}"
                ),
                forked_from=(
                    run_input.replay.model_dump(mode="json")
                    if run_input.replay is not None
                    else None
                ),
            )
        )
        await self.bus.set_meta(
            workflow_id,
            {
                "run_id": "",
                "tenant_id": run_input.tenant_id,
                "user_id": run_input.user_id or "",
                "graph": run_input.graph.name,
            },
        )

    @activity.defn(name=EVALUATION_COMPARE)
    @_heartbeating
    async def evaluation_compare(self, request: ForkCompare) -> CompareDone:
        """Compare one fork with its source, run the expression checks, store the entry."""
        store, archive = self.store, self._archive
        if request.fork_id is not None and request.fork_run_id:
            await archive.update_run(request.fork_id, run_id=request.fork_run_id)
        outcome: RunOutcome = "failed"
        document: dict[str, Any] | None = None
        if request.error is not None or request.fork_id is None:
            await store.update_entry(
                request.evaluation_id,
                request.index,
                outcome="failed",
                error=request.error or "the fork did not start",
            )
        else:
            fork = await self._ended_side(request.fork_id)
            source = await compare_side(archive, request.source_id)
            comparison = compare_runs(
                source,
                fork,
                related=relation(source, fork) or "evaluation fork",
                max_diff_entries=self.settings.compare_max_diff_entries,
            )
            document = check_document(comparison)
            error = None
            if fork.status != RunStatus.COMPLETED.value:
                record = await archive.get_run(request.fork_id)
                error = f"fork ended {fork.status}" + (
                    f": {record.error}" if record is not None and record.error else ""
                )
            else:
                outcome = "same" if comparison.output.same else "changed"
            checks = expression_checks(request.checks, document)
            await store.update_entry(
                request.evaluation_id,
                request.index,
                outcome=outcome,
                error=error,
                changed_nodes=comparison.changed_nodes,
                only_source=[node.node_id for node in comparison.only_a],
                only_candidate=[node.node_id for node in comparison.only_b],
                source_totals=_spend(comparison.totals["a"]).model_dump(mode="json"),
                candidate_totals=_spend(comparison.totals["b"]).model_dump(mode="json"),
                **{f"checks.{name}": r.model_dump(mode="json") for name, r in checks.items()},
            )
        await self._progress(request)
        wants_scores = any(check.graph is not None for check in request.checks)
        return CompareDone(outcome=outcome, check_input=document if wants_scores else None)

    async def _ended_side(self, fork_id: str) -> CompareSide:
        """The fork as its archive has it once it says the run ended.

        The child has closed, but its end may still be queued for the archive (a
        worker lost while draining holds the queue for a while): wait for the
        archiver, then raise a retryable error while the document still says
        otherwise, so the compare is retried rather than reading a run "running"
        (docs/replay-and-compare.md#limits).

        Raises:
            ApplicationError: the archive has not caught up yet (retryable).
        """
        side = await compare_side(self._archive, fork_id)
        if side.status in ENDED_STATUSES:
            return side
        outbox = attached_outbox(self._archive)
        if outbox is not None and await outbox.caught_up(
            within=self.settings.archive_catch_up_seconds
        ):
            side = await compare_side(self._archive, fork_id)
            if side.status in ENDED_STATUSES:
                return side
        raise ApplicationError(
            f"run '{fork_id}' has ended but its archive still says {side.status}",
            type="ArchiveBehind",
        )

    @activity.defn(name=EVALUATION_SCORES)
    @_heartbeating
    async def evaluation_scores(self, request: ForkCompare) -> CompareDone:
        """Store one run's scoring-graph results (read from their run documents)."""
        results: dict[str, CheckResult] = {}
        for name, started in request.scores.items():
            if started.run_id is None or started.error is not None:
                results[name] = started
                continue
            record = await self._archive.get_run(started.run_id)
            status = record.status if record is not None else None
            output = record.output if record is not None else None
            results[name] = scored(output, status, started.run_id)
        await self.store.set_checks(request.evaluation_id, request.index, results)
        return CompareDone(outcome="same")

    async def _progress(self, request: ForkCompare) -> None:
        counts = await self.store.done_counts(request.evaluation_id)
        done = sum(counts.values())
        poster = self._poster(self._stream(request.evaluation_id, request.tenant_id))
        await poster.post(
            AgentMessageType.BATCH_PROGRESS,
            f"evaluation: {done}/{request.total} runs done, {counts['failed']} failed",
            details={
                "evaluation_id": request.evaluation_id,
                "done": done,
                "failed": counts["failed"],
                "same": counts["same"],
                "changed": counts["changed"],
                "total": request.total,
                "source_id": request.source_id,
                "fork_id": request.fork_id,
            },
        )
        await poster.archive()

    @staticmethod
    def _stream(evaluation_id: str, tenant_id: str) -> RunRef:
        return RunRef(
            workflow_id=evaluation_id,
            run_id="",
            stream_id=evaluation_id,
            tenant_id=tenant_id,
            graph_name=EVALUATION_STREAM_GRAPH,
        )

    @activity.defn(name=EVALUATION_FINISH)
    @_heartbeating
    async def evaluation_finish(self, finish: EvaluationFinish) -> EvaluationResult:
        """The evaluation's end: its status, and its stream's last message."""
        if finish.status == "cancelled":
            await self.store.fail_running(finish.evaluation_id, "cancelled with the evaluation")
        await self.store.set_status(finish.evaluation_id, finish.status, finish.error)
        counts = await self.store.done_counts(finish.evaluation_id)
        poster = self._poster(self._stream(finish.evaluation_id, finish.tenant_id))
        details = {"status": finish.status, **counts}
        if finish.status == "cancelled":
            await poster.post(AgentMessageType.TERMINATED, "Evaluation cancelled", details=details)
        else:
            text = "Evaluation completed" if finish.status == "completed" else "Evaluation failed"
            await poster.post(AgentMessageType.COMPLETE, text, details=details, final=True)
        await poster.archive()
        return EvaluationResult(status=finish.status, runs=sum(counts.values()))


def evaluation_activities(bus: Any, archive: RunArchive | None, *, settings: Any) -> list[Any]:
    """The evaluation workflow's activities, bound to ``bus``, ``archive`` and ``settings``."""
    acts = EvaluationActivities(bus, archive, settings=settings)
    return [
        acts.evaluation_page,
        acts.evaluation_fork,
        acts.evaluation_compare,
        acts.evaluation_scores,
        acts.evaluation_finish,
    ]
