"""Running one activity outside a worker, as a given attempt of a given activity id."""

from __future__ import annotations

import dataclasses

from temporalio.testing import ActivityEnvironment

from spindle.worker.offerings import load_offerings

# The node types and tools a worker offers are loaded when it is built
# (``build_worker``); activities run here without one, so load them as it does.
load_offerings()


def env(activity_id: str, attempt: int = 1) -> ActivityEnvironment:
    """An ``ActivityEnvironment`` whose ``activity.info()`` has this id and attempt."""
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, activity_id=activity_id, attempt=attempt
    )
    return environment
