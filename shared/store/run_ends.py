"""Who is ending a run, noted before the stop is sent (Redis, 7 days).

A cancel or terminate names its reason to Temporal, but not in a form the run's
end can read back whole: the party that stops a run (the gateway's cancel and
terminate, a conversation's interrupt or rollback) notes ``EndedBy`` here first;
``finish_run`` (a cancel the run handles) and ``reconcile_closed_run`` (a close
the run never saw) read it to say who ended the run, on ``GET /runs/{id}`` and in
the webhook (``spindle.shared.contracts.run_end``). The first note wins: a run is
ended once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import ValidationError

from spindle.shared.contracts.run_end import EndedBy

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient

log = logging.getLogger(__name__)

# As long as a run's webhook is kept (shared.tasks.push.CONFIG_TTL_SECONDS).
NOTE_TTL_SECONDS = 7 * 24 * 3600


def note_key(workflow_id: str) -> str:
    return f"spindle:run-end:{workflow_id}"


class RunEnds:
    """The ``EndedBy`` notes of runs being stopped."""

    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis

    async def note(self, workflow_id: str, ended_by: EndedBy) -> bool:
        """Note who is ending the run; False when someone already had."""
        stored = await self.redis.set(
            note_key(workflow_id), ended_by.model_dump_json(), ex=NOTE_TTL_SECONDS, nx=True
        )
        return bool(stored)

    async def read(self, workflow_id: str) -> EndedBy | None:
        """The note, if any (an unreadable one is logged and ignored)."""
        raw = await self.redis.get(note_key(workflow_id))
        if raw is None:
            return None
        try:
            return EndedBy.model_validate_json(raw)
        except ValidationError:
            log.warning("end note of run %s is unreadable", workflow_id)
            return None

    async def forget(self, workflow_id: str) -> None:
        """Drop the note (the stop was refused: the run was not ended after all)."""
        await self.redis.delete(note_key(workflow_id))
