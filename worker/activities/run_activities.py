"""What every activity class of a graph run is built on.

The bus, the archive (``None`` when archiving is off) and the worker's settings are
given to the class by ``build_activities`` (no activity reads global settings), and
the run recorder, the task sync and each run's poster are built from them the same
way for every class.
"""

from __future__ import annotations

from functools import cached_property

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.activities.attachments import OutputAttachments
from spindle.worker.activities.call_replay import CallRecorder
from spindle.worker.activities.recorder import RunRecorder
from spindle.worker.activities.task_sync import TaskSync
from spindle.worker.contracts import RunRef
from spindle.worker.posting.poster import MessagePoster


class RunActivities:
    """The dependencies a run's activities share, injected once.

    Args:
        bus: the Redis message bus the activities post to.
        archive: the MongoDB archive, or ``None`` when archiving is off.
        settings: the worker's settings (message and port-data size limits, …).
    """

    def __init__(
        self,
        bus: MessageBus,
        archive: RunArchive | None = None,
        *,
        settings: Settings,
    ) -> None:
        self.bus = bus
        self.archive = archive
        self.settings = settings

    # Built on first use: not every activity class records node reports or tasks.
    @cached_property
    def recorder(self) -> RunRecorder:
        """Node reports and envelopes of this worker's runs, within the port-data size."""
        return RunRecorder(
            self.archive, port_data_max_bytes=self.settings.archive_port_data_max_bytes
        )

    @cached_property
    def tasks(self) -> TaskSync:
        """The seed 003 task records that follow this worker's runs."""
        return TaskSync(self.bus, self.archive)

    @cached_property
    def attachments(self) -> OutputAttachments:
        """Where the bytes of node outputs are stored as run files (docs/graphs/items.md)."""
        return OutputAttachments(self.archive, self.settings)

    @cached_property
    def calls(self) -> CallRecorder:
        """Recorded tool calls and LLM turns: recorded by every run, replayed by a
        recorded fork (docs/replay-and-compare.md#recorded-replay)."""
        return CallRecorder(self.bus.redis, self.archive, self.settings)

    def _poster(self, run: RunRef) -> MessagePoster:
        """A poster for ``run``'s stream, within the settings' message size."""
        return MessagePoster(
            self.bus, run, archive=self.archive, max_message_bytes=self.settings.max_message_bytes
        )


__all__ = ["RunActivities"]
