"""``HumanInput``: an answer no open prompt takes is refused, and why."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.runs import (
    UserInput,
)
from spindle.worker.workflows.human_input import HumanInput

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("node_id", "message"),
    [
        (None, "the run is not waiting for input"),
        ("approve", "the run is not waiting for input on node 'approve'"),
    ],
)
def test_an_answer_while_no_prompt_is_open_is_refused(node_id: str | None, message: str) -> None:
    prompts = HumanInput(owner="ann")
    answer = UserInput(data={"ok": True}, user_id="ann", node_id=node_id)
    for check in (prompts.check_answer, prompts.accept_answer):
        with pytest.raises(ApplicationError) as refused:
            check(answer)
        assert refused.value.type == "NotWaiting"
        assert refused.value.message == message
    assert prompts.oldest_pending is None
    assert not prompts.answered
