"""How the gateway talks to Temporal about runs: keys, ids, status, links.

The gateway never imports worker code: it starts ``GraphRun`` by name and
reaches it through these helpers, which turn Temporal's RPC failures into the
``spindle.shared.contracts.errors`` the problem handlers render.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from urllib.parse import quote

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform.settings import Settings

# Registered on the dev server by spindle.dev.embedded (SEARCH_ATTRIBUTES).
TENANT_KEY = SearchAttributeKey.for_keyword("SpindleTenant")
GRAPH_KEY = SearchAttributeKey.for_keyword("SpindleGraph")

# Describe is on the request path of most routes: fail fast when Temporal is slow.
DESCRIBE_TIMEOUT = timedelta(seconds=5)
# Other calls (start, cancel, terminate): the SDK retries while Temporal is
# unreachable; past this the client gets a 503 and retries itself.
RPC_TIMEOUT = timedelta(seconds=10)

RUN_STATUS_BY_TEMPORAL = {
    WorkflowExecutionStatus.RUNNING: RunStatus.RUNNING,
    WorkflowExecutionStatus.COMPLETED: RunStatus.COMPLETED,
    WorkflowExecutionStatus.FAILED: RunStatus.FAILED,
    WorkflowExecutionStatus.CANCELED: RunStatus.CANCELED,
    WorkflowExecutionStatus.TERMINATED: RunStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT: RunStatus.TIMED_OUT,
    WorkflowExecutionStatus.CONTINUED_AS_NEW: RunStatus.RUNNING,
}


def new_workflow_id(tenant_id: str, idempotency_key: str | None = None) -> str:
    """``run-<32 hex>``: random, or derived from the tenant's idempotency key so a
    retried POST addresses the same workflow."""
    if idempotency_key is None:
        return f"run-{uuid.uuid4().hex}"
    digest = hashlib.sha256(f"{tenant_id}\0{idempotency_key}".encode()).hexdigest()
    return f"run-{digest[:32]}"


def temporal_ui_url(settings: Settings, workflow_id: str) -> str:
    """The run in Temporal's web UI, by workflow id only: the UI opens the latest run,
    so the link follows a run that continued as new (docs/graphs/long-runs.md)."""
    base = settings.temporal_ui_url.rstrip("/")
    ns = settings.temporal_namespace
    return f"{base}/namespaces/{ns}/workflows/{quote(workflow_id, safe='')}"


async def describe_workflow(
    client: Client, workflow_id: str
) -> WorkflowExecutionDescription | None:
    """Temporal's description of the workflow's latest run, or None if unknown.

    Raises:
        Unavailable: Temporal cannot be reached.
    """
    try:
        return await client.get_workflow_handle(workflow_id).describe(rpc_timeout=DESCRIBE_TIMEOUT)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise temporal_error(exc) from exc


def run_status_of(description: WorkflowExecutionDescription) -> RunStatus:
    if description.status is None:
        return RunStatus.RUNNING
    return RUN_STATUS_BY_TEMPORAL.get(description.status, RunStatus.RUNNING)


def is_open(description: WorkflowExecutionDescription) -> bool:
    """Running; also a run described just as it continued as new (its next generation runs)."""
    return description.status in (
        None,
        WorkflowExecutionStatus.RUNNING,
        WorkflowExecutionStatus.CONTINUED_AS_NEW,
    )
