"""One expression budget per workflow task (docs/graphs/index.md#expression-limits).

Everything a run's workflow evaluates (edge conditions, the params of ``map``,
``prompt`` and ``workstream`` nodes, a workstream node's ``tools``) runs on the
workflow's thread, inside a workflow task that Temporal's deadlock detector
stops after 2 s: a task that never ends is retried forever. So every evaluation
of one workflow task shares one ``EvaluationBudget`` of
``GraphRunInput.expression_workflow_task_steps`` steps (the gateway's
``expression_workflow_task_steps`` setting; ``DEFAULT_WORKFLOW_TASK_STEPS`` when
the input names none). Past it the evaluation raises ``ExpressionBudgetSpent``,
which fails the node or the run with an error naming them and the setting, never
the workflow task.

A task is told apart by the history length Temporal reports at its start: the
same on replay, new for every task. The budgets live on the workflow instance
(``workflow.instance()``), so the collaborators that evaluate need no extra
argument.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.errors import AgentOutputInvalid, ExpressionBudgetSpent, NodeFailed
from spindle.shared.graphs.expressions import DEFAULT_WORKFLOW_TASK_STEPS, EvaluationBudget

SETTING = "SPINDLE_EXPRESSION_WORKFLOW_TASK_STEPS"
"""The setting that sizes a workflow task's budget (named in its error)."""
OWNER = "the workflow task"
_ATTRIBUTE = "_spindle_expression_budgets"


class TaskBudgets:
    """Hands out the current workflow task's budget, a fresh one for each task.

    Args:
        steps: steps per workflow task; None: ``DEFAULT_WORKFLOW_TASK_STEPS``.
    """

    def __init__(self, steps: int | None) -> None:
        self.steps = steps or DEFAULT_WORKFLOW_TASK_STEPS
        self._task = -1
        self._budget: EvaluationBudget | None = None

    def current(self) -> EvaluationBudget:
        """The budget of the workflow task under way."""
        task = workflow.info().get_current_history_length()
        if self._budget is None or task != self._task:
            self._task = task
            self._budget = EvaluationBudget(limit=self.steps, owner=OWNER, setting=SETTING)
        return self._budget


def install(steps: int | None) -> TaskBudgets:
    """Give the running workflow its budgets of ``steps`` per task (at its start)."""
    budgets = TaskBudgets(steps)
    setattr(workflow.instance(), _ATTRIBUTE, budgets)
    return budgets


def task_budget() -> EvaluationBudget:
    """The current workflow task's budget (the default size if none was installed)."""
    budgets = getattr(workflow.instance(), _ATTRIBUTE, None)
    if not isinstance(budgets, TaskBudgets):
        budgets = install(None)
    return budgets.current()


def node_failure(error: BaseException | None) -> type[NodeFailed]:
    """The error a run fails with for a node that failed with ``error``:
    ``ExpressionBudgetSpent`` when its expressions spent their budget (in an
    activity, or in this workflow), ``AgentOutputInvalid`` when an agent's answer
    broke its ``output_schema``, else ``NodeFailed``."""
    while error is not None:
        if isinstance(error, ApplicationError) and error.type == ExpressionBudgetSpent.__name__:
            return ExpressionBudgetSpent
        if isinstance(error, ApplicationError) and error.type == AgentOutputInvalid.__name__:
            return AgentOutputInvalid
        error = error.__cause__
    return NodeFailed
