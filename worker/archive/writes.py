"""How the worker's writers (poster, recorder) write to the archive: through the
outbox attached to it, else directly and best-effort. Never raises."""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.archive.operations import ArchiveOperation
    from spindle.worker.archive.outbox import ArchiveOutbox

logger = logging.getLogger(__name__)

_OUTBOXES: weakref.WeakKeyDictionary[RunArchive, ArchiveOutbox] = weakref.WeakKeyDictionary()


def attach_outbox(archive: RunArchive, outbox: ArchiveOutbox | None) -> None:
    """Make writers of ``archive`` (poster, recorder) fall back to ``outbox``;
    None detaches. The worker attaches one per process."""
    if outbox is None:
        _OUTBOXES.pop(archive, None)
    else:
        _OUTBOXES[archive] = outbox


def attached_outbox(archive: RunArchive | None) -> ArchiveOutbox | None:
    """The outbox attached to ``archive``, if any."""
    return None if archive is None else _OUTBOXES.get(archive)


async def archive_write(
    archive: RunArchive | None, op: ArchiveOperation, *, outbox: ArchiveOutbox | None = None
) -> bool:
    """Apply ``op`` through ``outbox`` (default: the one attached to ``archive``);
    without an outbox, best-effort. Never raises.

    While an archiver drains the outbox (``ArchiveOutbox.queue_all``) the write
    is queued for it instead: see ``archive_later``.

    Returns:
        True when the archive took it now.
    """
    if archive is None:
        return False
    outbox = outbox or attached_outbox(archive)
    if outbox is not None:
        if outbox.queue_all:
            await outbox.enqueue(archive, op)
            return False
        return await outbox.write(archive, op)
    try:
        await op.apply(archive)
    except Exception as exc:
        logger.warning("cannot archive %s: %s", op.describe(), exc)
        return False
    return True


async def archive_later(
    archive: RunArchive | None, *ops: ArchiveOperation, outbox: ArchiveOutbox | None = None
) -> int | None:
    """Hand operations to the archiver in one Redis round trip, off the caller's
    critical path; MongoDB sees them in the archiver's next batch, in this order.

    Without an archiver draining the outbox in this process (tests, tools), the
    operations are written one by one as ``archive_write`` does. Never raises.

    Returns:
        The ticket to wait for with ``ArchiveOutbox.applied_through``, or None
        when nothing was queued.
    """
    if archive is None:
        return None
    outbox = outbox or attached_outbox(archive)
    if outbox is not None and outbox.queue_all:
        return await outbox.enqueue(archive, *ops)
    for op in ops:
        await archive_write(archive, op, outbox=outbox)
    return None
