"""``UserMessages``: where a user's message to a run goes (the ``user_message`` update).

A message answers the prompt that waits, unless it names an agent that listens;
otherwise it is for the listening agent of the main workstream
(docs/conversations.md, "Talking to a running agent").

Runs inside the workflow sandbox: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.runs import SignalAck, UserInput
    from spindle.worker.workflows.agent_session import AgentSessions
    from spindle.worker.workflows.human_input import HumanInput


class UserMessages:
    """Routes user messages between the run's prompts and its agents."""

    def __init__(self, prompts: HumanInput, agents: AgentSessions) -> None:
        self._prompts = prompts
        self._agents = agents

    def check(self, user_input: UserInput) -> None:
        """The update's validator: the prompt that waits, else the listening agent."""
        if self._for_prompt(user_input):
            self._prompts.check_answer(user_input)
        else:
            self._agents.check_message(user_input)

    def take(self, user_input: UserInput) -> SignalAck:
        """The answer to the prompt that waits, else a message for the agent."""
        if self._for_prompt(user_input):
            return self._prompts.accept_answer(user_input)
        return self._agents.take_message(user_input)

    def _for_prompt(self, user_input: UserInput) -> bool:
        if user_input.node_id is not None and self._agents.listening(user_input.node_id):
            return False
        return self._prompts.oldest_pending is not None
