"""Evaluations: a candidate graph (or overrides) forked over many recorded runs and compared.

``POST /evaluations`` takes an ``EvaluationRequest``; the ``Evaluation`` workflow
(``spindle.worker.workflows.evaluation``) forks each source run with the candidate
(``ForkRequest`` built from the request, through ``spindle.shared.graphs.forks``),
waits for the fork, compares it with its source (``spindle.shared.graphs.run_compare``)
and evaluates the checks. Per-run results live in MongoDB
(``spindle.shared.store.evaluations``), never in the workflow's state
(docs/replay-and-compare.md#evaluations).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from spindle.shared.contracts.forks import (
    MAX_FORK_OVERRIDES,
    ForkRequest,
    NodeOverride,
    OnMiss,
    ReplayMode,
)
from spindle.shared.contracts.runs import GraphRunInput

#: The evaluation workflow's type name (never changes: recorded histories name it).
EVALUATION_WORKFLOW = "Evaluation"
#: The workflow's activities (names never change either).
EVALUATION_PAGE = "evaluation_page"
EVALUATION_FORK = "evaluation_fork"
EVALUATION_COMPARE = "evaluation_compare"
EVALUATION_SCORES = "evaluation_scores"
EVALUATION_FINISH = "evaluation_finish"
#: Checks one evaluation may have.
MAX_CHECKS = 20
#: Run ids one request may list (the ``evaluation_max_runs`` setting caps it further).
MAX_SOURCE_RUN_IDS = 10_000

EvaluationStatus = Literal["running", "completed", "cancelled", "failed"]
RunOutcome = Literal["pending", "running", "same", "changed", "failed"]


class EvaluationCheck(BaseModel):
    """One check of every (source, candidate) pair: a JMESPath ``expr`` or a scoring ``graph``.

    ``expr`` is evaluated over ``{source: {output, totals}, candidate: {output, totals}}``
    and passes when its value is truthy (JMESPath's truth: not false, null, or an
    empty string, list or object). ``graph`` names a registered graph run as a child
    with that same document as its input; it passes when the run completes with an
    output that is ``true``-ish: an object with ``passed: true``, or (not an object)
    any truthy value.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    expr: str | None = Field(None, min_length=1, max_length=2000)
    graph: str | None = Field(None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _one_kind(self) -> EvaluationCheck:
        if (self.expr is None) == (self.graph is None):
            raise ValueError(f"check '{self.name}': give expr or graph (one of them)")
        return self


class EvaluationSource(BaseModel):
    """Which recorded runs to evaluate: listed ids, or a query of the tenant's runs."""

    model_config = ConfigDict(extra="forbid")

    run_ids: list[str] | None = Field(None, min_length=1, max_length=MAX_SOURCE_RUN_IDS)
    graph: str | None = Field(None, min_length=1, max_length=128)
    status: str | None = Field("completed", description="query: runs of this status")
    since: datetime | None = Field(None, description="query: runs created at or after")
    until: datetime | None = Field(None, description="query: runs created before")
    limit: int | None = Field(
        None,
        ge=1,
        description="query: at most this many (newest first); default and cap: evaluation_max_runs",
    )

    @model_validator(mode="after")
    def _ids_or_query(self) -> EvaluationSource:
        if self.run_ids is not None and self.graph is not None:
            raise ValueError("source: give run_ids or a query (graph, status, ...), not both")
        if self.run_ids is None and self.graph is None:
            raise ValueError("source: give run_ids, or graph (with status, since, until, limit)")
        return self


class EvaluationCandidate(BaseModel):
    """What the forks run instead of the sources' graph (default: the source's own)."""

    model_config = ConfigDict(extra="forbid")

    graph: str | None = Field(None, min_length=1, max_length=128)
    version: str | None = Field(None, min_length=1, max_length=128)
    graph_spec: dict[str, Any] | None = None
    overrides: dict[str, NodeOverride] = Field(default_factory=dict, max_length=MAX_FORK_OVERRIDES)

    @model_validator(mode="after")
    def _one_candidate(self) -> EvaluationCandidate:
        # A fork's rules (ForkRequest), checked here so the request is refused with 422.
        if self.graph is not None and self.graph_spec is not None:
            raise ValueError("candidate: give graph or graph_spec, not both")
        if self.version is not None and self.graph is None:
            raise ValueError("candidate: version needs graph (the registered graph's name)")
        return self


class EvaluationRequest(BaseModel):
    """``POST /evaluations``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": {"graph": "support-pipeline", "status": "completed", "limit": 50},
                    "candidate": {"overrides": {"summary": {"params": {"model": "small"}}}},
                    "tools": "recorded",
                    "llm": "live",
                    "checks": [
                        {"name": "same_priority", "expr": "source.output == candidate.output"},
                        {"name": "cheaper", "expr": "candidate.totals.cost <= source.totals.cost"},
                    ],
                    "concurrency": 4,
                }
            ]
        },
    )

    source: EvaluationSource
    candidate: EvaluationCandidate = Field(default_factory=EvaluationCandidate)
    tools: ReplayMode = Field("recorded", description="the forks' tool calls")
    llm: ReplayMode = Field("live", description="the forks' LLM turns")
    on_miss: OnMiss = Field("fail", description="a recorded call with no match")
    checks: list[EvaluationCheck] = Field(default_factory=list, max_length=MAX_CHECKS)
    concurrency: int | None = Field(
        None, ge=1, description="forks at once; default and cap: evaluation_max_concurrency"
    )

    @model_validator(mode="after")
    def _unique_checks(self) -> EvaluationRequest:
        names = [check.name for check in self.checks]
        if len(names) != len(set(names)):
            raise ValueError("checks: names must be unique")
        return self

    def fork_request(self) -> ForkRequest:
        """The fork every source run gets (a whole replay from the entry)."""
        return ForkRequest(
            graph=self.candidate.graph,
            version=self.candidate.version,
            graph_spec=self.candidate.graph_spec,
            overrides=self.candidate.overrides,
            tools=self.tools,
            llm=self.llm,
            on_miss=self.on_miss,
        )


class EvaluationStarted(BaseModel):
    """``POST /evaluations``'s answer."""

    evaluation_id: str
    runs: int = Field(description="source runs the evaluation forks")
    status_url: str
    stream_url: str


class CheckResult(BaseModel):
    """One check of one run."""

    passed: bool
    value: Any = None
    error: str | None = None
    run_id: str | None = Field(None, description="a scoring graph's run")


class SpendTotals(BaseModel):
    """Tokens, cost and wall-clock time of one run."""

    tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0
    duration_ms: float = 0.0


class EvaluationRunEntry(BaseModel):
    """One source run of an evaluation and what its fork did."""

    index: int
    source_id: str
    fork_id: str | None = None
    outcome: RunOutcome = "pending"
    error: str | None = None
    changed_nodes: list[str] = Field(default_factory=list)
    only_source: list[str] = Field(default_factory=list)
    only_candidate: list[str] = Field(default_factory=list)
    checks: dict[str, CheckResult] = Field(default_factory=dict)
    source_totals: SpendTotals | None = None
    candidate_totals: SpendTotals | None = None


class CheckCounts(BaseModel):
    passed: int = 0
    failed: int = 0


class EvaluationSummary(BaseModel):
    """Counts and totals over an evaluation's runs (computed from the stored entries)."""

    runs: int = 0
    same: int = 0
    changed: int = 0
    failed: int = 0
    pending: int = 0
    checks: dict[str, CheckCounts] = Field(default_factory=dict)
    source: SpendTotals = Field(default_factory=SpendTotals)
    candidate: SpendTotals = Field(default_factory=SpendTotals)
    delta: SpendTotals = Field(default_factory=SpendTotals, description="candidate minus source")


def _utc(value: datetime) -> datetime:
    """MongoDB hands datetimes back naive; they are UTC (answered with their offset)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]


class EvaluationView(BaseModel):
    """``GET /evaluations/{id}``."""

    evaluation_id: str
    tenant_id: str
    user_id: str | None = None
    status: EvaluationStatus
    error: str | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    request: dict[str, Any]
    summary: EvaluationSummary
    runs: list[EvaluationRunEntry] = Field(default_factory=list)
    runs_total: int = 0
    runs_offset: int = 0


class EvaluationListItem(BaseModel):
    evaluation_id: str
    status: EvaluationStatus
    created_at: UtcDatetime
    updated_at: UtcDatetime
    runs: int
    done: int
    graph: str | None = None


class EvaluationList(BaseModel):
    evaluations: list[EvaluationListItem]
    total: int


# -- the workflow and its activities -----------------------------------------------


class EvaluationInput(BaseModel):
    """The ``Evaluation`` workflow's input (and what it continues as new with)."""

    evaluation_id: str
    tenant_id: str
    user_id: str | None = None
    fork: ForkRequest
    checks: list[EvaluationCheck] = Field(default_factory=list)
    total: int = Field(description="source runs, indexed 0..total-1 in the store")
    concurrency: int = Field(ge=1)
    page_size: int = Field(ge=1)
    next_index: int = Field(0, description="first run of the page this generation starts with")
    search_attributes: bool = Field(
        True,
        description="give each fork the SpindleTenant / SpindleGraph search attributes the "
        "gateway's starts give (False only where the server has none: the time-skipping "
        "test server)",
    )


class EvaluationResult(BaseModel):
    status: EvaluationStatus
    runs: int


class EvaluationPageRequest(BaseModel):
    """``evaluation_page``: the page's runs not finished yet."""

    evaluation_id: str
    first: int
    size: int


class PageRun(BaseModel):
    index: int
    source_id: str
    fork_id: str | None = None


class EvaluationPage(BaseModel):
    runs: list[PageRun] = Field(default_factory=list)


class ForkStart(BaseModel):
    """``evaluation_fork``: build, admit and record one fork (or a scoring graph's run)."""

    evaluation_id: str
    tenant_id: str
    user_id: str | None = None
    index: int
    workflow_id: str = Field(description="the new run's id (chosen by the workflow)")
    source_id: str | None = Field(None, description="a fork: its source run")
    fork: ForkRequest | None = None
    scoring_graph: str | None = Field(None, description="a check's scoring graph")
    scoring_input: Any = None


class ForkPrepared(BaseModel):
    """The run to start as a child, or why not (``retry_after``: the permit, later)."""

    run_input: GraphRunInput | None = Field(None, description="the run to start")
    error: str | None = None
    retry_after: float | None = None


class ForkCompare(BaseModel):
    """``evaluation_compare``: compare, check and store one run's result."""

    evaluation_id: str
    tenant_id: str
    index: int
    source_id: str
    fork_id: str | None = None
    fork_run_id: str | None = None
    error: str | None = None
    checks: list[EvaluationCheck] = Field(default_factory=list)
    scores: dict[str, CheckResult] = Field(
        default_factory=dict, description="the scoring graphs' results, by check"
    )
    total: int = 0


class CompareDone(BaseModel):
    outcome: RunOutcome
    check_input: Any = Field(None, description="{source, candidate}: the scoring graphs' input")


class EvaluationFinish(BaseModel):
    evaluation_id: str
    tenant_id: str
    status: EvaluationStatus
    error: str | None = None
