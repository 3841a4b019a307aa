"""Which node runs next: the pure scheduling logic of a graph run.

No Temporal, no I/O, no clock: the ``GraphRun`` workflow feeds it node
completions and runs what it returns, and the unit tests drive it directly.

Rules:

- The entry node runs first. When a node finishes, each outgoing edge is taken iff
  its ``from_port`` is unset or among the node's ports, and its ``when`` is unset or
  JMESPath-truthy over the run state.
- Forward edges (every edge that does not close a cycle, see
  ``spindle.shared.contracts.graph_spec.find_back_edges``) have join semantics: a node runs once all
  its forward incoming edges are resolved and at least one was taken. If none was
  taken the node is SKIPPED and its outgoing edges resolve as not taken, so skips
  propagate downstream.
- A back-edge (loop) that is taken re-runs its target. Everything forward-reachable
  from the target (the loop region) is reset to pending, and the node that took the
  back-edge leaves its forward edges undecided: it runs again in the next iteration
  and decides then. Edges entering the region from outside keep their resolution,
  so a loop never waits on a branch that will not run again.
- Loops are bounded by ``edge.max_iterations`` (traversals of that back-edge) and
  ``node.max_visits`` (executions of a node). A back-edge whose bound is reached is
  not taken and yields a warning; the node's forward edges then decide as usual.
  Nothing else bounds a node: a node without ``max_visits`` runs as often as its
  loops' edges allow. The one safety cap is the ``max_node_visits`` setting the run
  is given (``max_node_visits`` here; None: none): a node that would run more often
  raises ``NodeVisitCapReached`` and the run fails naming the setting; validation
  refuses a graph whose bounds allow more (docs/graphs/index.md, "Loops and bounds").
- Every ready node is returned at once, so independent branches run concurrently.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from spindle.shared.contracts.graph_spec import EdgeSpec, GraphSpec
from spindle.shared.contracts.runs import SchedulerSnapshot
from spindle.shared.graphs.expressions import EvaluationBudget, evaluate, is_truthy
from spindle.shared.graphs.structure import find_back_edges

if TYPE_CHECKING:
    from spindle.worker.contracts import NodeOutcome

LEGACY_VISITS_LIMIT = 1000
"""The hidden cap on a node without ``max_visits`` that runs recorded before
``NODE_VISITS_PATCH`` applied (a warning, then the loop not taken); they replay so."""


class NodeVisitCapReached(Exception):
    """A node would run more often than the run's ``max_node_visits`` setting allows."""

    def __init__(self, node_id: str, cap: int) -> None:
        super().__init__(
            f"node '{node_id}' would run more than {cap} times: the max_node_visits "
            f"setting (SPINDLE_MAX_NODE_VISITS) stops a run there "
            f"(docs/graphs/index.md#loops-and-bounds)"
        )
        self.node_id = node_id
        self.cap = cap


def _no_legacy_cap() -> bool:
    return False


class NodeState(Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Activation:
    """A node to execute now, with its 1-based visit number."""

    node_id: str
    visit: int


@dataclass(frozen=True)
class Skip:
    """A node that will not run in this pass, and why."""

    node_id: str
    reason: str


@dataclass
class NodeCompletion:
    """A node task's end (an outcome or an error), queued in the order it happened.

    Defined here, outside the sandboxed workflow module, so that ``@dataclass`` runs
    once per worker rather than once per run (worker/sandbox.py).
    """

    activation: Activation
    outcome: NodeOutcome | None
    error: BaseException | None


@dataclass
class Advance:
    """What changed after a step: nodes to run, nodes skipped, warnings to post."""

    ready: list[Activation] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    taken: list[int] = field(default_factory=list)
    """Indexes of the completed node's edges that were taken (their envelopes travel)."""


class GraphScheduler:
    """Tracks node and edge states of one run and decides what runs next.

    Args:
        spec: the graph; assumed structurally valid (``validate_structure``).
        max_node_visits: the run's safety cap on any node's executions (the
            ``max_node_visits`` setting); None: no cap.
        legacy_cap: asked once a node without ``max_visits`` reaches
            ``LEGACY_VISITS_LIMIT`` visits; True applies that old hidden cap (a run
            recorded before it was removed, replaying).
    """

    def __init__(
        self,
        spec: GraphSpec,
        *,
        max_node_visits: int | None = None,
        legacy_cap: Callable[[], bool] = _no_legacy_cap,
    ) -> None:
        self._spec = spec
        self._cap = max_node_visits
        self._legacy_cap = legacy_cap
        self._edges = spec.edges
        self._back = find_back_edges(spec)
        self._nodes = {n.id: n for n in spec.nodes}
        self._out: dict[str, list[int]] = {n: [] for n in self._nodes}
        self._forward_in: dict[str, list[int]] = {n: [] for n in self._nodes}
        for i, edge in enumerate(self._edges):
            self._out[edge.from_].append(i)
            if i not in self._back:
                self._forward_in[edge.to].append(i)
        self._state: dict[str, NodeState] = dict.fromkeys(self._nodes, NodeState.PENDING)
        self._resolved: dict[int, bool | None] = {
            i: None for i in range(len(self._edges)) if i not in self._back
        }
        self._visits: dict[str, int] = dict.fromkeys(self._nodes, 0)
        self._traversals: dict[int, int] = dict.fromkeys(self._back, 0)
        self._regions: dict[str, frozenset[str]] = {}
        self._started = False

    # -- queries -------------------------------------------------------------

    @property
    def running(self) -> list[str]:
        """Nodes handed out and not yet completed, in graph order."""
        return [n for n, s in self._state.items() if s is NodeState.RUNNING]

    @property
    def finished(self) -> bool:
        """True once started and no node is running (nothing more can become ready)."""
        return self._started and not self.running

    def state_of(self, node_id: str) -> NodeState:
        return self._state[node_id]

    def visits(self, node_id: str) -> int:
        return self._visits[node_id]

    def is_back_edge(self, edge_index: int) -> bool:
        return edge_index in self._back

    # -- continue-as-new -----------------------------------------------------

    def snapshot(self) -> SchedulerSnapshot:
        """Everything ``restore`` needs to carry on in a new workflow run."""
        return SchedulerSnapshot(
            started=self._started,
            node_states={n: s.value for n, s in self._state.items()},
            resolved={str(i): r for i, r in self._resolved.items()},
            visits=dict(self._visits),
            traversals={str(i): t for i, t in self._traversals.items()},
        )

    def restore(self, snapshot: SchedulerSnapshot) -> None:
        """Take over the node/edge states, visits and loop counters of ``snapshot``.

        Raises:
            ValueError: the snapshot is of another graph (unknown node or edge).
        """
        unknown = set(snapshot.node_states) - set(self._nodes)
        if unknown or any(int(i) not in self._resolved for i in snapshot.resolved):
            raise ValueError(f"scheduler snapshot does not fit graph {self._spec.name!r}")
        self._started = snapshot.started
        for node_id, state in snapshot.node_states.items():
            self._state[node_id] = NodeState(state)
        for index, taken in snapshot.resolved.items():
            self._resolved[int(index)] = taken
        self._visits.update(snapshot.visits)
        for index, count in snapshot.traversals.items():
            if int(index) in self._traversals:
                self._traversals[int(index)] = count

    # -- transitions ---------------------------------------------------------

    def start(self) -> Advance:
        """Activate the entry node."""
        if self._started:
            raise RuntimeError("scheduler already started")
        self._started = True
        advance = Advance()
        work: deque[tuple[int, bool]] = deque()
        self._activate(self._spec.entry, advance, work)
        self._drain(work, advance)
        return advance

    def complete(
        self,
        node_id: str,
        ports: list[str],
        state: dict[str, Any],
        budget: EvaluationBudget | None = None,
    ) -> Advance:
        """Record that ``node_id`` finished and decide its outgoing edges.

        Args:
            node_id: a node previously returned as ready.
            ports: the ports the node chose (routers); edges with a ``from_port``
                are taken only when it is among them.
            state: the run state after the node's output was stored, for ``when``.
            budget: shared by every ``when`` (the workflow task's expression
                budget); None: each is bounded alone.

        Raises:
            ValueError: the node is not running.
            spindle.shared.graphs.expressions.ExpressionError: a ``when`` cannot be evaluated.
            NodeVisitCapReached: a node would run past the run's ``max_node_visits``.
        """
        if self._state.get(node_id) is not NodeState.RUNNING:
            raise ValueError(f"node '{node_id}' is not running")
        self._state[node_id] = NodeState.DONE
        advance = Advance()
        out = self._out[node_id]

        for i in out:
            if i not in self._back or not self._fires(self._edges[i], ports, state, budget):
                continue
            bound = self._loop_bound_hit(i)
            if bound is None:
                advance.taken.append(i)
                self._loop_back(i, advance)
                return advance
            advance.warnings.append(bound)

        work: deque[tuple[int, bool]] = deque(
            (i, self._fires(self._edges[i], ports, state, budget))
            for i in out
            if i not in self._back
        )
        advance.taken.extend(i for i, fired in work if fired)
        self._drain(work, advance)
        return advance

    # -- internals -----------------------------------------------------------

    @staticmethod
    def _fires(
        edge: EdgeSpec, ports: list[str], state: dict[str, Any], budget: EvaluationBudget | None
    ) -> bool:
        if edge.from_port is not None and edge.from_port not in ports:
            return False
        return edge.when is None or is_truthy(evaluate(edge.when, state, budget=budget))

    def _visit_limit(self, node_id: str) -> int | None:
        """The node's own ``max_visits`` (None: only its loops bound it)."""
        limit = self._nodes[node_id].max_visits
        if limit is None and self._visits[node_id] >= LEGACY_VISITS_LIMIT and self._legacy_cap():
            return LEGACY_VISITS_LIMIT
        return limit

    def _loop_bound_hit(self, edge_index: int) -> str | None:
        edge = self._edges[edge_index]
        if edge.max_iterations is not None and self._traversals[edge_index] >= edge.max_iterations:
            return (
                f"loop {edge.from_} → {edge.to} reached max_iterations "
                f"({edge.max_iterations}); not repeating '{edge.to}'"
            )
        limit = self._visit_limit(edge.to)
        if limit is not None and self._visits[edge.to] >= limit:
            return (
                f"node '{edge.to}' reached max_visits ({limit}); "
                f"loop {edge.from_} → {edge.to} not taken"
            )
        return None

    def _region(self, node_id: str) -> frozenset[str]:
        """Nodes forward-reachable from ``node_id`` (itself included)."""
        cached = self._regions.get(node_id)
        if cached is not None:
            return cached
        seen = {node_id}
        frontier = [node_id]
        while frontier:
            current = frontier.pop()
            for i in self._out[current]:
                target = self._edges[i].to
                if i not in self._back and target not in seen:
                    seen.add(target)
                    frontier.append(target)
        region = frozenset(seen)
        self._regions[node_id] = region
        return region

    def _loop_back(self, edge_index: int, advance: Advance) -> None:
        edge = self._edges[edge_index]
        self._traversals[edge_index] += 1
        region = self._region(edge.to)
        for node_id in region:
            # A node still running (a parallel branch of the loop body) keeps
            # running; its completion resolves its edges into the new iteration.
            if self._state[node_id] is not NodeState.RUNNING:
                self._state[node_id] = NodeState.PENDING
        for i in self._resolved:
            e = self._edges[i]
            if e.from_ in region and e.to in region:
                self._resolved[i] = None
        # Loops nested strictly inside this one start counting afresh.
        for i in self._traversals:
            inner = self._edges[i]
            if i != edge_index and inner.to != edge.to and inner.to in region:
                self._traversals[i] = 0
        work: deque[tuple[int, bool]] = deque()
        self._activate(edge.to, advance, work)
        self._drain(work, advance)

    def _activate(self, node_id: str, advance: Advance, work: deque[tuple[int, bool]]) -> None:
        limit = self._visit_limit(node_id)
        if limit is not None and self._visits[node_id] >= limit:
            advance.warnings.append(f"node '{node_id}' reached max_visits ({limit}); skipped")
            self._skip(node_id, f"max_visits ({limit}) reached", advance, work)
            return
        if self._cap is not None and self._visits[node_id] >= self._cap:
            raise NodeVisitCapReached(node_id, self._cap)
        self._visits[node_id] += 1
        self._state[node_id] = NodeState.RUNNING
        advance.ready.append(Activation(node_id, self._visits[node_id]))

    def _skip(
        self, node_id: str, reason: str, advance: Advance, work: deque[tuple[int, bool]]
    ) -> None:
        self._state[node_id] = NodeState.SKIPPED
        advance.skipped.append(Skip(node_id, reason))
        work.extend((i, False) for i in self._out[node_id] if i not in self._back)

    def _drain(self, work: deque[tuple[int, bool]], advance: Advance) -> None:
        # A work list rather than recursion: skip chains may be as long as the graph.
        while work:
            edge_index, taken = work.popleft()
            self._resolved[edge_index] = taken
            target = self._edges[edge_index].to
            if self._state[target] is not NodeState.PENDING:
                continue
            incoming = [self._resolved[i] for i in self._forward_in[target]]
            if any(r is None for r in incoming):
                continue
            if any(incoming):
                self._activate(target, advance, work)
            else:
                self._skip(target, self._not_taken(target), advance, work)

    def _not_taken(self, node_id: str) -> str:
        """Why a node is skipped: each incoming edge, and what it needed."""
        edges = []
        for i in self._forward_in[node_id]:
            edge = self._edges[i]
            text = f"{edge.from_} → {edge.to}"
            if self._state[edge.from_] is NodeState.SKIPPED:
                text += f" ('{edge.from_}' was skipped)"
            else:
                needs = [f"port {edge.from_port!r}"] if edge.from_port is not None else []
                needs += [f"when {edge.when}"] if edge.when is not None else []
                text += f" (not taken: {', '.join(needs)})" if needs else ""
            edges.append(text)
        return "no incoming edge was taken: " + "; ".join(edges)
