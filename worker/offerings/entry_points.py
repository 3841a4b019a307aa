"""Entry-point plug-ins: packages add node types and tools by being installed."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

logger = logging.getLogger(__name__)


def load_entry_points(group: str) -> None:
    """Import every module registered under ``group``; a broken plug-in is logged,
    not fatal, so one bad package cannot stop a worker."""
    for ep in entry_points(group=group):
        try:
            ep.load()
        except Exception:
            logger.exception("cannot load %s entry point %s", group, ep.value)
