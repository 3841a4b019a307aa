"""Applying a node's writes to shared state and context (docs/graphs/index.md#shared-state).

Pure (no I/O, no clock): the workflow applies the writes a node's outcome carries,
after the node succeeded, so a refused write fails that node. Shared state lives in
the run state under ``state``; the graph declares the keys nodes may write
(``state.writable``), a node may narrow them (``writes``). Both shared state and
context stay within the ``shared_state_max_bytes`` setting.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from spindle.shared.contracts.envelope import StateUpdate
from spindle.shared.contracts.errors import StateWriteRefused


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (what it costs in history)."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())


def applied(
    current: dict[str, Any],
    update: StateUpdate,
    *,
    what: str,
    allowed: Collection[str] | None,
    max_bytes: int,
) -> dict[str, Any]:
    """``current`` after ``update`` (a new dict; ``current`` is left alone).

    Args:
        current: the shared state (or context) before the node's writes.
        update: the node's writes.
        what: ``"state"`` or ``"context"``, for the error.
        allowed: the keys the node may write; None: any.
        max_bytes: the ``shared_state_max_bytes`` setting. A write that leaves the
            whole no larger than before is taken even above it.

    Raises:
        StateWriteRefused: a key not allowed, a merge into a non-object, or the
            result over ``max_bytes``; the message names the key and the size.
    """
    if allowed is not None:
        for key in update.written():
            if key not in allowed:
                declared = ", ".join(sorted(allowed)) or "none"
                raise StateWriteRefused(
                    f"state key '{key}' is not writable: declare it in the graph's "
                    f"state.writable (and the node's writes, if it lists them); "
                    f"writable here: {declared}",
                    errors=[{"field": f"state.{key}", "rule": "not_writable", "message": key}],
                )
    result = dict(current)
    result.update(update.set)
    for key, part in update.merge.items():
        base = result.get(key)
        if base is None:
            base = {}
        if not isinstance(base, dict):
            raise StateWriteRefused(
                f"{what} key '{key}' holds a {type(base).__name__}, not an object: "
                "merge needs one (use set)",
                errors=[{"field": f"{what}.{key}", "rule": "merge_not_object", "message": key}],
            )
        result[key] = {**base, **part}
    for key in update.delete:
        result.pop(key, None)
    size = json_size(result)
    if size > max_bytes and size > json_size(current):
        written = [k for k in update.written() if k in result] or update.written()
        key = max(written, key=lambda k: json_size(result.get(k)))
        raise StateWriteRefused(
            f"{what} key '{key}' is {json_size(result.get(key)):,} bytes: the run's {what} "
            f"would be {size:,} bytes, over the shared_state_max_bytes setting "
            f"({max_bytes:,}; SPINDLE_SHARED_STATE_MAX_BYTES)",
            errors=[{"field": f"{what}.{key}", "rule": "too_large", "message": f"{size} bytes"}],
        )
    return result
