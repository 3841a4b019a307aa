"""The expression language of graphs: JMESPath, pure and deterministic.

Used for edge conditions (``when``) and node input mappings (``inputs``). It has
no I/O, clock or randomness, so it is safe inside the workflow sandbox; it never
falls back to ``eval``.

Every expression has a bounded cost (docs/graphs/index.md, "Expression limits").
A short expression can ask for a huge result (``input | [@,@] | [@,@] | ...``
doubles at each pipe), so:

- ``compile_expression`` refuses, at registration and before any evaluation, an
  expression longer than ``MAX_EXPRESSION_LENGTH``, with more than
  ``MAX_EXPRESSION_NODES`` syntax nodes or ``MAX_EXPRESSION_DEPTH`` levels, or
  whose static growth bound (how many times the data it reads its result can be)
  passes ``MAX_EXPRESSION_GROWTH``;
- ``evaluate`` counts its work deterministically (syntax nodes visited, never
  time: it runs inside workflows) and the size of every value it builds, and
  stops past ``MAX_EVALUATION_STEPS`` or ``MAX_RESULT_SIZE``;
- ``render_template`` stops once its text passes ``MAX_RESULT_SIZE``;
- an ``EvaluationBudget`` shared by every evaluation of one node execution (each
  item, template and route) or of one workflow task (edge conditions,
  workflow-side params) bounds their total: ``ExpressionBudgetSpent`` names the
  owner and the setting that sizes it.

Each raises ``ExpressionTooCostly``, an ``ExpressionError``: callers fail the one
node (or run) with the message, never the worker or a workflow task.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult
from jmespath.visitor import TreeInterpreter

if TYPE_CHECKING:
    from jmespath.visitor import _TreeNode

MAX_EXPRESSION_LENGTH = 2048
"""Characters in one expression (a template's ``{{ }}`` field counts alone)."""
MAX_EXPRESSION_NODES = 512
"""Syntax nodes in one parsed expression."""
MAX_EXPRESSION_DEPTH = 64
"""Nesting of the parsed expression (evaluation recurses that deep)."""
MAX_EXPRESSION_GROWTH = 1000
"""Static bound: how many times the size of the data it reads a result may be."""
MAX_EVALUATION_STEPS = 200_000
"""Work of one evaluation (or one template): syntax nodes visited (projections
count per element) plus elements measured in the values it builds."""
MAX_RESULT_SIZE = 8 * 1024 * 1024
"""Size (about the bytes of its compact JSON) of any value an evaluation builds,
and of a rendered template."""
DEFAULT_NODE_STEPS = 1_000_000
"""Default of the ``expression_node_steps`` setting: the steps every evaluation of
one node execution may take together (about a second of one idle core)."""
DEFAULT_WORKFLOW_TASK_STEPS = MAX_EVALUATION_STEPS
"""Steps the evaluations of one workflow task may take together when the run's
input names none (``expression_workflow_task_steps``, set by the gateway): what
one evaluation could take alone, so a task stays well under Temporal's 2 s
deadlock detector even on a busy core inside the workflow sandbox (where an
evaluation runs about half as fast). A constant, so a recorded history replays
the same on every worker."""
MAX_WORKFLOW_TASK_STEPS = 1_000_000
"""Highest ``expression_workflow_task_steps`` accepted."""


class ExpressionError(ValueError):
    """An expression does not parse or cannot be evaluated."""


class ExpressionTooCostly(ExpressionError):
    """An expression is too complex to register, or its evaluation passed a cap."""


TOO_COSTLY_RULE = "expression_too_costly"
"""The rule a graph error names when an expression passes a complexity limit."""


def rule_of(exc: ExpressionError, default: str) -> str:
    """The graph-error rule for ``exc``: ``TOO_COSTLY_RULE`` or ``default``."""
    return TOO_COSTLY_RULE if isinstance(exc, ExpressionTooCostly) else default


_BUILDERS = frozenset(
    {
        "multi_select_list",
        "multi_select_dict",
        "projection",
        "filter_projection",
        "value_projection",
        "flatten",
        "function_expression",
        "slice",
    }
)
"""Syntax nodes whose result is a new value (the others select part of theirs)."""
_PRODUCTS = frozenset({"subexpression", "pipe", "index_expression", "projection"})
_SUMS = frozenset({"multi_select_list", "multi_select_dict"})


def _product(values: list[int]) -> int:
    out = 1
    for value in values:
        out *= max(value, 1)
    return out


def _growth(node: _TreeNode, count: list[int], depth: int = 1) -> int:
    """An upper bound of |result| / |data read| (each value at least 1), counting nodes."""
    count[0] += 1
    if depth > MAX_EXPRESSION_DEPTH:
        raise ExpressionTooCostly(
            f"expression nested too deeply (the limit is {MAX_EXPRESSION_DEPTH} levels)"
        )
    kind = node["type"]
    children = [c for c in node.get("children", []) if isinstance(c, dict)]
    if kind == "filter_projection":  # its third child is the condition: a boolean
        children = children[:2]
    elif kind in {"comparator", "not_expression"}:
        for child in children:
            _growth(child, count, depth + 1)
        return 1
    grown = [_growth(child, count, depth + 1) for child in children]
    if kind in _SUMS:
        return max(sum(grown), 1)
    if kind in _PRODUCTS or kind in {"filter_projection", "value_projection"}:
        return _product(grown)
    if kind == "function_expression":
        # join(sep, list) repeats sep per element; map(&e, list) applies e per element.
        return _product(grown)
    return max(grown, default=1)


def _check_complexity(expression: str, parsed: _TreeNode) -> None:
    count = [0]
    try:
        growth = _growth(parsed, count)
    except ExpressionTooCostly as exc:
        raise ExpressionTooCostly(f"{exc}: {expression[:80]!r}") from None
    if count[0] > MAX_EXPRESSION_NODES:
        raise ExpressionTooCostly(
            f"expression too complex: {count[0]} syntax nodes "
            f"(the limit is {MAX_EXPRESSION_NODES}): {expression[:80]!r}"
        )
    if growth > MAX_EXPRESSION_GROWTH:
        raise ExpressionTooCostly(
            f"expression too costly: its result can be {growth} times the size of the "
            f"data it reads (the limit is {MAX_EXPRESSION_GROWTH}; each [a, b] or "
            f"{{a: x, b: y}} multiplies what follows it): {expression[:80]!r}"
        )


@lru_cache(maxsize=2048)
def compile_expression(expression: str) -> ParsedResult:
    """Parse once and check the complexity limits.

    Raises:
        ExpressionError: it does not parse; ``ExpressionTooCostly`` when it is
            longer, larger or can grow more than the limits allow.
    """
    if not expression.strip():
        raise ExpressionError("empty expression")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ExpressionTooCostly(
            f"expression too long: {len(expression)} characters "
            f"(the limit is {MAX_EXPRESSION_LENGTH}): {expression[:80]!r}..."
        )
    try:
        parsed = jmespath.compile(expression)
    except JMESPathError as exc:
        raise ExpressionError(f"invalid JMESPath expression {expression!r}: {exc}") from exc
    except RecursionError as exc:
        raise ExpressionTooCostly(f"expression nested too deeply: {expression[:80]!r}...") from exc
    _check_complexity(expression, parsed.parsed)
    return parsed


class ExpressionBudgetSpent(ExpressionTooCostly):
    """A shared budget (a node execution's, a workflow task's) ran out.

    Attributes:
        owner: what the budget was for (``"node 'x'"``, ``"the workflow task"``).
        limit: its size in steps.
        setting: the setting that sizes it, named in the message.
    """

    def __init__(self, message: str, *, owner: str, limit: int, setting: str) -> None:
        super().__init__(message)
        self.owner = owner
        self.limit = limit
        self.setting = setting


class EvaluationBudget:
    """The steps a node execution's (or a workflow task's) evaluations may take together.

    ``evaluate`` and ``render_template`` make one per call when given none. A
    caller passes one budget to every evaluation of one node execution (each
    item of a filter or map, each template, each route) or of one workflow task
    (its edge conditions and workflow-side params), so that the whole is bounded,
    not each evaluation: ``limit`` steps over all of them, and still at most
    ``MAX_EVALUATION_STEPS`` for any single one (docs/graphs/index.md,
    "Expression limits"). Each evaluation keeps its own count and size cache, so
    evaluations in several threads may share a budget (their total is then
    counted without a lock: about, never far, over ``limit``).

    Args:
        expression: named in the error when a budget made for it runs out.
        limit: steps over all the evaluations given this budget; default
            ``MAX_EVALUATION_STEPS``.
        owner: what the budget is for, named in the error (``"node 'x'"``).
        setting: the setting that sizes ``limit``, named in the error.
        yield_every: in a worker thread (never in a workflow), let other threads
            have the interpreter every this many steps (``time.sleep(0)``), so the
            event loop waits about a millisecond for it, not the 5 ms switch
            interval; 0: never.
    """

    def __init__(
        self,
        expression: str = "",
        *,
        limit: int | None = None,
        owner: str = "",
        setting: str = "",
        yield_every: int = 0,
    ) -> None:
        self.expression = expression
        self.limit = MAX_EVALUATION_STEPS if limit is None else limit
        self.owner = owner
        self.setting = setting
        self.steps = 0
        self.yield_every = yield_every
        # The next step count at which ``reached`` must look: the limit, or a yield.
        self.checkpoint = self._next_checkpoint()

    def _next_checkpoint(self) -> int:
        if self.yield_every > 0:
            return min(self.steps + self.yield_every, self.limit + 1)
        return self.limit + 1

    def reached(self, expression: str) -> None:
        """At ``checkpoint``: fail past ``limit``, else yield the interpreter.

        Raises:
            ExpressionBudgetSpent: past ``limit``.
        """
        if self.steps > self.limit:
            raise self.spent(expression)
        time.sleep(0)  # only with yield_every: a worker thread, never a workflow
        self.checkpoint = self._next_checkpoint()

    @property
    def remaining(self) -> int:
        """Steps left over all evaluations."""
        return max(self.limit - self.steps, 0)

    def spent(self, expression: str) -> ExpressionBudgetSpent:
        """The error once the budget ran out, at ``expression``."""
        owner = self.owner or "the evaluation"
        setting = f" (setting {self.setting})" if self.setting else ""
        return ExpressionBudgetSpent(
            f"{owner} spent its expression budget of {self.limit} evaluation steps"
            f"{setting}, at {expression[:80]!r}",
            owner=owner,
            limit=self.limit,
            setting=self.setting,
        )


class _Evaluation:
    """One evaluation (or one template) against a budget: its steps and sizes."""

    def __init__(self, budget: EvaluationBudget, expression: str) -> None:
        self.budget = budget
        self.expression = expression
        self.steps = 0
        # id -> (value, size): a value built from shared parts ([@, @]) is measured
        # as its JSON would be, each distinct part once; the value is kept so its id
        # is not reused while the evaluation lasts.
        self._sizes: dict[int, tuple[Any, int]] = {}

    def step(self) -> None:
        """Count one unit of work.

        Raises:
            ExpressionTooCostly: past ``MAX_EVALUATION_STEPS`` in this evaluation;
                ``ExpressionBudgetSpent`` past the budget's ``limit``.
        """
        self.steps += 1
        budget = self.budget
        budget.steps += 1
        if self.steps > MAX_EVALUATION_STEPS:
            raise ExpressionTooCostly(
                f"expression {self.expression[:80]!r} stopped after "
                f"{MAX_EVALUATION_STEPS} evaluation steps (the limit)"
            )
        if budget.steps >= budget.checkpoint:
            budget.reached(self.expression)

    def check_size(self, value: Any) -> int:
        """The size of ``value`` as compact JSON, about (each shared part measured once).

        Raises:
            ExpressionTooCostly: over ``MAX_RESULT_SIZE``, or past the work cap.
        """
        try:
            size = self._size(value)
        except RecursionError as exc:
            raise self._too_large() from exc
        if size > MAX_RESULT_SIZE:
            raise self._too_large()
        return size

    def _too_large(self) -> ExpressionTooCostly:
        return ExpressionTooCostly(
            f"expression {self.expression[:80]!r} builds a value larger than "
            f"{MAX_RESULT_SIZE} bytes (the limit)"
        )

    def _size(self, value: Any) -> int:
        if isinstance(value, str):
            return len(value) + 2
        if not isinstance(value, list | dict):
            return 8
        known = self._sizes.get(id(value))
        if known is not None:
            return known[1]
        size = 2
        items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        for key, item in items:
            self.step()  # measuring is work too
            size += self._size(item) + (len(key) + 4 if isinstance(key, str) else 1)
            if size > MAX_RESULT_SIZE:
                raise self._too_large()
        self._sizes[id(value)] = (value, size)
        return size


class _BudgetedInterpreter(TreeInterpreter):
    """JMESPath's tree interpreter, counting each visit and measuring what it builds."""

    def __init__(self, evaluation: _Evaluation) -> None:
        super().__init__()
        self._evaluation = evaluation

    def visit(self, node: _TreeNode, *args: Any, **kwargs: Any) -> Any:
        self._evaluation.step()
        result = super().visit(node, *args, **kwargs)
        if node["type"] in _BUILDERS:
            self._evaluation.check_size(result)
        return result


def _search(expression: str, data: Any, evaluation: _Evaluation) -> Any:
    parsed = compile_expression(expression)
    evaluation.expression = expression
    try:
        return _BudgetedInterpreter(evaluation).visit(parsed.parsed, data)
    except JMESPathError as exc:
        raise ExpressionError(f"cannot evaluate {expression!r}: {exc}") from exc
    except RecursionError as exc:
        raise ExpressionTooCostly(f"cannot evaluate {expression!r}: nested too deeply") from exc


def evaluate(expression: str, data: Any, *, budget: EvaluationBudget | None = None) -> Any:
    """Evaluate an expression over ``data`` (the run state), within the caps.

    Args:
        expression: JMESPath.
        data: what it reads.
        budget: shared with other evaluations (see ``EvaluationBudget``); a fresh
            one when None.

    Raises:
        ExpressionError: it does not compile or fails; ``ExpressionTooCostly`` when
            it passes ``MAX_EVALUATION_STEPS`` or builds a value larger than
            ``MAX_RESULT_SIZE``; ``ExpressionBudgetSpent`` when ``budget`` runs out.
    """
    if budget is None:
        budget = EvaluationBudget(expression)
    return _search(expression, data, _Evaluation(budget, expression))


def is_truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, empty string/list/object are false."""
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


_TEMPLATE_FIELD = "{{"


def render_template(text: str, data: Any, *, budget: EvaluationBudget | None = None) -> str:
    """Replace each ``{{ expression }}`` in ``text`` with its value over ``data``.

    Strings are inserted as they are; other values as compact JSON (integers
    beyond 64 bits too). All the fields of one template count as one evaluation
    (``MAX_EVALUATION_STEPS``), against ``budget`` when given (shared with the
    node's other evaluations), and the rendered text may not pass ``MAX_RESULT_SIZE``.

    Raises:
        ExpressionError: a field does not compile or fails; ``ExpressionTooCostly``
            past a cap; ``ExpressionBudgetSpent`` when ``budget`` runs out.
    """
    if _TEMPLATE_FIELD not in text:
        return text
    out: list[str] = []
    length = 0
    pos = 0
    evaluation = _Evaluation(budget or EvaluationBudget(text), text)
    while True:
        start = text.find(_TEMPLATE_FIELD, pos)
        if start < 0:
            out.append(text[pos:])
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise ExpressionError(f"unclosed '{{{{' in template at position {start}")
        out.append(text[pos:start])
        expression = text[start + 2 : end].strip()
        value = _search(expression, data, evaluation)
        if value is not None:
            # Measured before it is serialised: shared parts would be written out
            # once per reference.
            evaluation.check_size(value)
            piece = value if isinstance(value, str) else _compact_json(value)
            out.append(piece)
            length += len(piece) + end - pos
        if length > MAX_RESULT_SIZE:
            raise ExpressionTooCostly(
                f"template renders to more than {MAX_RESULT_SIZE} characters (the limit)"
            )
        pos = end + 2
    return "".join(out)


def _compact_json(value: Any) -> str:
    import orjson

    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        # orjson refuses integers beyond 64 bits; the standard library writes them.
        import json

        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ExpressionError(f"cannot write the value as JSON: {exc}") from exc


def template_expressions(text: str) -> list[str]:
    """The expressions inside ``{{ }}`` of a template, for validation."""
    found: list[str] = []
    pos = 0
    while (start := text.find(_TEMPLATE_FIELD, pos)) >= 0:
        end = text.find("}}", start + 2)
        if end < 0:
            raise ExpressionError(f"unclosed '{{{{' in template at position {start}")
        found.append(text[start + 2 : end].strip())
        pos = end + 2
    return found
