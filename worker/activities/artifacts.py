"""``merge_child_artifacts``: a finished workstream's artifacts join its parent's.

A child's ``out/x`` and ``files/x`` become the parent's ``files/<launch_id>/x``
(``spindle.shared.contracts.workstreams.merged_artifact_name``); other names stay with the
child. Both runs belong to the same tenant. The copy is idempotent: a file the
parent already holds with the same content is not copied again, so a retried
activity (or a replayed parent) merges each artifact once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity

from spindle.shared.contracts.errors import NotFound
from spindle.shared.contracts.workstreams import merged_artifact_name
from spindle.shared.store.file_store import FileStore
from spindle.worker.contracts import MERGE_CHILD_ARTIFACTS, ArtifactMerge, MergedArtifacts

if TYPE_CHECKING:
    from spindle.shared.store.archive import RunArchive
    from spindle.shared.store.file_store import StoredFile

logger = logging.getLogger(__name__)

CHILD_ARTIFACT_PREFIXES = ("out/", "files/")


class ArtifactActivities:
    """Artifact bookkeeping of workstreams, with the file store injected.

    Args:
        files: where runs keep their files; None when MongoDB is disabled (then
            nothing is merged).
    """

    def __init__(self, files: FileStore | None) -> None:
        self.files = files

    @activity.defn(name=MERGE_CHILD_ARTIFACTS)
    async def merge_child_artifacts(self, merge: ArtifactMerge) -> MergedArtifacts:
        """Copy the child's ``out/`` and ``files/`` artifacts into the parent's space.

        Returns:
            The parent's names of the merged artifacts, sorted (already present
            ones included).
        """
        if self.files is None:
            return MergedArtifacts()
        merged: list[str] = []
        for prefix in CHILD_ARTIFACT_PREFIXES:
            for stored in await self.files.list(
                tenant_id=merge.tenant_id, workflow_id=merge.child_workflow_id, prefix=prefix
            ):
                target = merged_artifact_name(merge.launch_id, stored.name)
                if target is None:
                    continue
                activity.heartbeat(stored.name)
                if not await self._holds(merge, target, stored):
                    await self.files.copy_file(
                        merge.tenant_id,
                        merge.child_workflow_id,
                        stored.name,
                        merge.parent_workflow_id,
                        target,
                    )
                merged.append(target)
        if merged:
            logger.info(
                "merged %d artifact(s) of %s into %s",
                len(merged),
                merge.child_workflow_id,
                merge.parent_workflow_id,
            )
        return MergedArtifacts(names=sorted(merged))

    async def _holds(self, merge: ArtifactMerge, name: str, source: StoredFile) -> bool:
        """True if the parent already has ``name`` with the source's content."""
        assert self.files is not None
        try:
            present = await self.files.get(
                tenant_id=merge.tenant_id, workflow_id=merge.parent_workflow_id, name=name
            )
        except NotFound:
            return False
        return present.sha256 == source.sha256 and present.size == source.size


def artifact_activities(archive: RunArchive | None) -> list[Callable[..., Any]]:
    """The artifact activities, on the archive's database (none: nothing to merge)."""
    files = FileStore(archive.database) if archive is not None else None
    return [ArtifactActivities(files).merge_child_artifacts]
