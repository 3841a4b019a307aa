"""``ListTasks`` (A2A 1.0): the caller's tenant's runs, newest first, from the archive.

The page token is the offset of the next page (opaque to clients). A status
filter selects the run status the state stands for first (``canceled`` runs
for CANCELED, ``failed`` for FAILED); ``contextId`` selects the one run it
names (context id = task id = workflow id).
"""

from __future__ import annotations

from a2a.types import ListTasksRequest, ListTasksResponse, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import validate_page_size

from spindle.gateway.models import RunDetail
from spindle.gateway.protocols.a2a.task_mapping import task_from_run
from spindle.shared.contracts.identity import Identity
from spindle.shared.contracts.runs import PendingInput, RunStatus
from spindle.shared.store.archive import RunArchive, RunRecord

STATUS_BY_STATE: dict[TaskState, RunStatus] = {
    TaskState.TASK_STATE_WORKING: RunStatus.RUNNING,
    TaskState.TASK_STATE_INPUT_REQUIRED: RunStatus.PAUSED,
    TaskState.TASK_STATE_COMPLETED: RunStatus.COMPLETED,
    TaskState.TASK_STATE_FAILED: RunStatus.FAILED,
    TaskState.TASK_STATE_CANCELED: RunStatus.CANCELED,
}


def _offset(page_token: str) -> int:
    if not page_token:
        return 0
    if not page_token.isdigit():
        raise InvalidParamsError(message="pageToken is not one this server gave out")
    return int(page_token)


def _detail(record: RunRecord) -> RunDetail:
    return RunDetail(
        workflow_id=record.workflow_id,
        run_id=record.run_id,
        graph_name=record.graph_name,
        tenant_id=record.tenant_id,
        status=record.status,
        pending_input=(
            PendingInput.model_validate(record.pending_input) if record.pending_input else None
        ),
        output=record.output,
        error=record.error,
    )


async def list_tasks(
    params: ListTasksRequest, identity: Identity, archive: RunArchive
) -> ListTasksResponse:
    """One page of the tenant's tasks."""
    page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    validate_page_size(page_size)
    offset = _offset(params.page_token)
    status: str | None = None
    if params.status != TaskState.TASK_STATE_UNSPECIFIED:
        wanted = STATUS_BY_STATE.get(params.status)
        if wanted is None:
            return ListTasksResponse(page_size=page_size, total_size=0)
        status = wanted.value
    if params.context_id:
        record = await archive.get_run(params.context_id)
        matches = (
            record is not None
            and record.tenant_id == identity.tenant_id
            and (status is None or record.status == status)
        )
        records = [record] if matches and record is not None and offset == 0 else []
        total = 1 if matches else 0
    else:
        records, total = await archive.list_runs(
            tenant_id=identity.tenant_id, status=status, limit=page_size, offset=offset
        )
    tasks = [task_from_run(_detail(r), r.user_id) for r in records]
    following = offset + len(records)
    return ListTasksResponse(
        tasks=tasks,
        page_size=page_size,
        total_size=total,
        next_page_token=str(following) if following < total else "",
    )
