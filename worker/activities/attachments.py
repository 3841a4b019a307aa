"""Binary data in a node's output, stored as run files and referenced (seed 001).

Temporal history and the archive hold JSON; a node (or a map's item) whose result
holds ``bytes`` has them stored in the run's file store instead, and its output
names them under ``binary`` (docs/graphs/items.md#binary-data):

- a result that *is* bytes becomes ``{"binary": {"data": <reference>}}`` (for an
  item, ``data`` is then null and the item has ``binary``);
- a dict result keeps its other keys; each of its ``bytes`` values moves to
  ``binary.<key>``.

A reference is ``{"file", "size", "sha256", "content_type"}``: ``file`` is the
path of the run file (``nodes/<node>/<visit>/<key>``, for items
``items/<map>/<visit>/<index>/<key>``), which ``GET /runs/{id}/files/{path}``
downloads and the ``read_file`` tool reads. The bytes never enter a history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spindle.shared.platform.mongo import mongo_client
from spindle.shared.platform.settings import Settings
from spindle.shared.store.file_store import FileStore
from spindle.worker.contracts import NodeExecution, RunRef

if TYPE_CHECKING:
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.registry import NodeResult


def split_binary(data: Any) -> tuple[Any, dict[str, bytes]]:
    """``data`` without its bytes, and the bytes by name (``data`` when it is bytes)."""
    if isinstance(data, bytes | bytearray):
        return None, {"data": bytes(data)}
    if isinstance(data, dict):
        blobs = {k: bytes(v) for k, v in data.items() if isinstance(v, bytes | bytearray)}
        if blobs:
            return {k: v for k, v in data.items() if k not in blobs}, blobs
    return data, {}


async def store_binary(files: FileStore, run: RunRef, path: str, content: bytes) -> dict[str, Any]:
    """Store ``content`` as the run file ``path``; its reference."""
    stored = await files.put_bytes(
        tenant_id=run.tenant_id, workflow_id=run.workflow_id, name=path, data=content
    )
    return {
        "file": stored.name,
        "size": stored.size,
        "sha256": stored.sha256,
        "content_type": stored.content_type,
    }


class OutputAttachments:
    """Stores the bytes of ``execute_node`` results (see the module docstring).

    Args:
        archive: its database holds the run files; None: the settings' MongoDB.
        settings: the worker's settings (MongoDB).
    """

    def __init__(self, archive: RunArchive | None, settings: Settings) -> None:
        self._database = archive.database if archive is not None else None
        self._settings = settings
        self._files: FileStore | None = None

    def _store(self) -> FileStore:
        if self._files is None:
            database = self._database
            if database is None:
                settings = self._settings
                database = mongo_client(settings, appname="spindle-files")[settings.mongo_db]
            self._files = FileStore(database)
        return self._files

    async def referenced(self, execution: NodeExecution, result: NodeResult) -> NodeResult:
        """``result`` with the bytes of its data stored and referenced under ``binary``."""
        data, blobs = split_binary(result.data)
        if not blobs:
            return result
        node = execution.node
        references = {
            name: await store_binary(
                self._store(), execution.run, f"nodes/{node.id}/{execution.visit}/{name}", content
            )
            for name, content in blobs.items()
        }
        output = dict(data) if isinstance(data, dict) else {}
        output["binary"] = references
        return result.model_copy(update={"data": output})
