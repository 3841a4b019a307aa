"""``GraphRun``: one durable run of a graph, the Temporal workflow.

This module is the workflow's Temporal surface only: its init, run, updates,
query and signals, each handing over to the run's ``RunEngine``
(``spindle.worker.workflows.run_engine``), where the run's logic lives, or to
one of the engine's collaborators (its prompts, budget, workstreams).

Why two modules: Temporal's sandbox imports a workflow's module afresh for every
workflow run and applies ``@workflow.defn`` to its class again, which inspects
every member of the class (docs/operations/scaling.md, "Workflow sandbox"). A
class of handlers only, in a module of few imports, made that about half as
costly a run; the engine's module is passed through, imported once per worker.

Names never change: the workflow (``GRAPH_RUN_WORKFLOW``), its updates, query
and signals are what runs in flight and their histories know.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import RAISE_BUDGET_UPDATE, BudgetAck, BudgetRaise
    from spindle.shared.contracts.runs import (
        COMPLETE_AGENT_UPDATE,
        DESCRIBE_QUERY,
        FILE_UPLOADED_SIGNAL,
        GRAPH_RUN_WORKFLOW,
        USER_INPUT_UPDATE,
        USER_MESSAGE_UPDATE,
        CompleteAck,
        CompleteAgent,
        FileUploaded,
        GraphRunInput,
        GraphRunResult,
        RunDescription,
        SignalAck,
        UserInput,
    )
    from spindle.worker.workflows.run_engine import RunEngine
    from spindle.worker.workflows.workstreams.parent_handlers import WorkstreamHandlers


@workflow.defn(name=GRAPH_RUN_WORKFLOW)
class GraphRun(WorkstreamHandlers):
    """Runs a ``GraphSpec`` node by node (``RunEngine``); see the module docstring."""

    engine: type[RunEngine] = RunEngine

    @workflow.init
    def __init__(self, run_input: GraphRunInput) -> None:
        self._engine = self.engine(run_input)
        self._workstreams = self._engine.workstreams

    @workflow.run
    async def run(self, run_input: GraphRunInput) -> GraphRunResult:
        """Run the graph to its end; the result carries the output and node reports.

        Raises:
            ApplicationError: ``NodeFailed`` (non-retryable) when a node failed
                after its retries; the run is then Failed in Temporal.
        """
        return await self._engine.run()

    @workflow.update(name=USER_INPUT_UPDATE)
    async def user_input(self, user_input: UserInput) -> SignalAck:
        """Answer a pending prompt (validated first)."""
        return self._engine.prompts.accept_answer(user_input)

    @user_input.validator
    def _validate_user_input(self, user_input: UserInput) -> None:
        self._engine.prompts.check_answer(user_input)

    @workflow.update(name=USER_MESSAGE_UPDATE)
    async def user_message(self, user_input: UserInput) -> SignalAck:
        """A user message: the answer to the prompt that waits, else for the listening
        agent of the main workstream (docs/conversations.md)."""
        await self._engine.agents.resumed(user_input.node_id)  # first task of a generation
        return self._engine.messages.take(user_input)

    @user_message.validator
    def _validate_user_message(self, user_input: UserInput) -> None:
        self._engine.messages.check(user_input)

    @workflow.update(name=COMPLETE_AGENT_UPDATE)
    async def complete_agent(self, request: CompleteAgent) -> CompleteAck:
        """End the listening interactive agent (COMPLETE); the graph goes on."""
        return self._engine.agents.complete(request)

    @complete_agent.validator
    def _validate_complete_agent(self, request: CompleteAgent) -> None:
        self._engine.agents.check_complete(request)

    @workflow.signal(name=FILE_UPLOADED_SIGNAL)
    def file_uploaded(self, upload: FileUploaded) -> None:
        """A file was uploaded to the run: SYSTEM post; the listening agent is told."""
        self._engine.agents.file_uploaded(upload)

    @workflow.query(name=DESCRIBE_QUERY)
    def describe(self) -> RunDescription:
        """The live state: status, running nodes, the oldest pending prompt, reports."""
        return self._engine.describe()

    @workflow.update(name=RAISE_BUDGET_UPDATE)
    async def raise_budget(self, raised: BudgetRaise) -> BudgetAck:
        """Raise the run's caps; a run held at a cap resumes when none is reached."""
        return self._engine.budget.raise_budget(raised)

    @raise_budget.validator
    def _validate_raise_budget(self, raised: BudgetRaise) -> None:
        self._engine.budget.check_raise(raised)


WORKFLOWS: list[type] = [GraphRun]
