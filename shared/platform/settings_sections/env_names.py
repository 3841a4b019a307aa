"""The environment variables a setting is read from."""

from __future__ import annotations

from pydantic import AliasChoices


def spindle_env(name: str, *plain: str) -> AliasChoices:
    """``SPINDLE_<name>`` first, then the conventional plain names (``REDIS_URL``...)."""
    return AliasChoices(f"SPINDLE_{name}", *plain)
