"""``finish_workstream``: a child workstream's result artifact and closing message.

A child (``spindle.worker.workflows.workstreams.child_workflow.Workstream``) posts to its parent's
stream with its own ``workstream_id`` (the compact ``w``). When it ends it
stores its answer as the artifact ``out/result.md`` of its OWN workflow id (the
parent merges ``out/`` and ``files/`` into ``files/<launch_id>/``), then posts
one COMPLETE message (with ``w``; only the main workstream's COMPLETE closes the
conversation). A failed child posts ERROR first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.workstreams import WorkstreamState
from spindle.shared.platform.settings import Settings
from spindle.shared.store.file_store import FileStore
from spindle.worker.activities.recorder import summarize
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.contracts import FINISH_WORKSTREAM, WorkstreamFinish, WorkstreamFinished

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive

logger = logging.getLogger(__name__)

RESULT_ARTIFACT = "out/result.md"
RESULT_CONTENT_TYPE = "text/markdown; charset=utf-8"
SUMMARY_CHARS = 500


class WorkstreamActivities(RunActivities):
    """A child workstream's own activities, with the bus and stores injected.

    Args:
        bus: where messages go (the parent's stream).
        archive: where posted messages are archived (None: nowhere).
        files: where artifacts go (None: no artifacts are written).
        settings: the worker's settings.
    """

    def __init__(
        self,
        bus: MessageBus,
        archive: RunArchive | None,
        files: FileStore | None,
        *,
        settings: Settings,
    ) -> None:
        super().__init__(bus, archive, settings=settings)
        self.files = files

    @activity.defn(name=FINISH_WORKSTREAM)
    async def finish_workstream(self, finish: WorkstreamFinish) -> WorkstreamFinished:
        """Store the answer as ``out/result.md`` then post the child's COMPLETE.

        Idempotent: a retried attempt replaces the artifact and re-posts under
        the same dedup keys.
        """
        run = finish.run
        poster = self._poster(run)
        await poster.announce_retry(f"finishing workstream {run.workstream_id}")
        artifacts: list[str] = []
        if finish.answer and self.files is not None:
            await self.files.put_bytes(
                tenant_id=run.tenant_id,
                workflow_id=run.workflow_id,
                name=RESULT_ARTIFACT,
                data=finish.answer.encode("utf-8"),
                content_type=RESULT_CONTENT_TYPE,
                uploaded_by=finish.user_id,
            )
            artifacts.append(RESULT_ARTIFACT)
        state = WorkstreamState(finish.state)
        details: dict[str, Any] = {
            "launch_id": run.workstream_id,
            "status": state.value,
            "iterations": finish.iterations,
            "artifacts": artifacts,
        }
        if state == WorkstreamState.FAILED:
            error = finish.error or "the workstream failed"
            await poster.post(AgentMessageType.ERROR, error, details={**details, "error": error})
        await poster.post(AgentMessageType.COMPLETE, closing_text(finish), details=details)
        await poster.archive()
        return WorkstreamFinished(artifacts=artifacts)


def closing_text(finish: WorkstreamFinish) -> str:
    """The COMPLETE message's text: the (partial) answer's summary, or the state."""
    summary = summarize(finish.answer, SUMMARY_CHARS) if finish.answer else None
    if finish.state == WorkstreamState.COMPLETED.value:
        return summary or f"Workstream {finish.run.workstream_id} completed"
    head = f"Workstream {finish.run.workstream_id} {finish.state}"
    return f"{head}: {summary}" if summary else head


def workstream_activities(
    bus: MessageBus, archive: RunArchive | None, *, settings: Settings
) -> list[Callable[..., Any]]:
    """The child workstream's activities; artifacts go to the archive's database."""
    files = FileStore(archive.database) if archive is not None else None
    return [WorkstreamActivities(bus, archive, files, settings=settings).finish_workstream]
