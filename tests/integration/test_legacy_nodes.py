"""Legacy custom nodes that return bare values (seed 000, Q&A 4).

The value is wrapped in the node's NodeMessage envelope, a deprecation warning is
logged once per node type, and the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from spindle.nodes import NodeContext, node_type
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.runs import NodeStatus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.activities.nodes import NodeActivities
from spindle.worker.contracts import NodeExecution, RunRef

pytestmark = pytest.mark.integration

SUFFIX = uuid.uuid4().hex[:8]
DICT_TYPE = f"legacy_dict_{SUFFIX}"
INT_TYPE = f"legacy_int_{SUFFIX}"


@node_type(DICT_TYPE)
async def legacy_dict(ctx: NodeContext) -> Any:
    """Returns a bare dict, as pre-NodeResult custom nodes did."""
    return {"echo": ctx.previous}


@node_type(INT_TYPE)
async def legacy_int(ctx: NodeContext) -> Any:
    """Returns a bare int."""
    return 42


@pytest.fixture(scope="module")
def legacy_settings(redis_url: str, mongo_url: str) -> Settings:
    return Settings(redis_url=redis_url, mongo_url=mongo_url, mongo_db="spindle_legacy")


@pytest.fixture(scope="module")
async def io(legacy_settings: Settings) -> AsyncIterator[tuple[MessageBus, RunArchive]]:
    settings = legacy_settings
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    yield bus, archive
    await archive.close()
    await bus.close()


def execution(node_id: str, type_name: str, run_input: Any) -> NodeExecution:
    wf = f"legacy-{uuid.uuid4().hex[:12]}"
    return NodeExecution(
        run=RunRef(workflow_id=wf, run_id="run-1", stream_id=wf, graph_name="g"),
        node=NodeSpec.model_validate({"id": node_id, "type": type_name}),
        state={"input": run_input, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )


def env(activity_id: str) -> ActivityEnvironment:
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, activity_id=activity_id)
    return environment


async def test_bare_values_are_wrapped_with_one_deprecation_warning_per_type(
    io: tuple[MessageBus, RunArchive],
    legacy_settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus, archive = io
    acts = NodeActivities(bus, archive, settings=legacy_settings)
    caplog.set_level(logging.WARNING, logger="spindle.worker.activities.nodes")

    first = execution("d", DICT_TYPE, {"q": 1})
    with pytest.warns(DeprecationWarning, match=DICT_TYPE):
        outcome = await env("d.1").run(acts.execute_node, first)
    assert outcome.output == {"echo": {"q": 1}}
    assert outcome.report.status == NodeStatus.SUCCESS
    [report] = await archive.node_reports(first.run.workflow_id)
    assert report["output"]["type"] == "NodeMessage"
    assert report["output"]["from"] == "d"
    assert report["output"]["payload"] == {"echo": {"q": 1}}

    number = execution("n", INT_TYPE, None)
    with pytest.warns(DeprecationWarning, match=INT_TYPE):
        outcome = await env("n.1").run(acts.execute_node, number)
    assert outcome.output == 42
    [report] = await archive.node_reports(number.run.workflow_id)
    assert report["output"]["payload"] == 42

    # A second run of the same legacy type is wrapped again but not warned again.
    again = execution("d", DICT_TYPE, "x")
    outcome = await env("d.1").run(acts.execute_node, again)
    assert outcome.output == {"echo": "x"}

    warned = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(warned) == 2
    assert any(DICT_TYPE in m and "raw dict" in m for m in warned)
    assert any(INT_TYPE in m and "raw int" in m for m in warned)
