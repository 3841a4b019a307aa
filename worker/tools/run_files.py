"""The run's own files, for the built-in ``read_file`` tool.

See docs/conversations.md#reading-run-files.

A tool is a plain function; which run it serves is set around the call by the
``tool_call`` activity (``reading_files``), in a context variable, so a tool reads
only the files of the run (tenant and workflow id) whose agent called it: the
store's every query names both, and a path is checked by ``safe_artifact_path``
(``..``, absolute paths and empty segments refused).

Text (a text media type, or ``application/octet-stream`` whose bytes are UTF-8
without NUL) is given up to
``read_file_max_bytes`` per call, cut on a character boundary, with the offset to
go on from; anything else is given by reference: name, type, size, path and the
URL to download it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from spindle.shared.contracts.errors import NotFound, ToolError, ValidationFailed
from spindle.shared.store.file_store import (
    DEFAULT_CONTENT_TYPE,
    FileStore,
    StoredFile,
    safe_artifact_path,
)

_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/javascript",
        "application/x-sh",
        "application/toml",
        "application/sql",
        "application/x-ndjson",
    }
)
_UTF8_MAX_CHAR = 4


@dataclass(frozen=True)
class RunFiles:
    """Which run's files a tool call may read, and how much text per call.

    Attributes:
        store: the file store (None: archiving is off, there are no run files).
        tenant_id: the run's tenant.
        workflow_id: the run (a workstream: its own child run).
        max_bytes: the ``read_file_max_bytes`` setting.
    """

    store: FileStore | None
    tenant_id: str
    workflow_id: str
    max_bytes: int


_CURRENT: ContextVar[RunFiles | None] = ContextVar("spindle_run_files", default=None)


@contextlib.contextmanager
def reading_files(files: RunFiles) -> Iterator[None]:
    """Tool calls inside the block read ``files``' run."""
    token = _CURRENT.set(files)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _current() -> RunFiles:
    files = _CURRENT.get()
    if files is None:
        raise ToolError("read_file reads the files of the agent's run: it has no run here")
    if files.store is None:
        raise ToolError("this deployment keeps no run files (archiving is off)")
    return files


def _is_text_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media.startswith("text/") or media in _TEXT_TYPES or media.endswith(("+json", "+xml"))


def _utf8_prefix(data: bytes) -> tuple[str, int] | None:
    """The longest decodable prefix of ``data`` (at most 3 bytes short: a character
    cut at the end) and its length in bytes; None when it is not UTF-8 text."""
    if b"\x00" in data:
        return None
    for cut in range(min(_UTF8_MAX_CHAR, len(data) + 1)):
        try:
            return data[: len(data) - cut].decode("utf-8"), len(data) - cut
        except UnicodeDecodeError:
            continue
    return None


def file_reference(stored: StoredFile, note: str) -> dict[str, Any]:
    """A file given by reference: what it is and where to download it."""
    return {
        "name": stored.name,
        "content_type": stored.content_type,
        "size": stored.size,
        "path": stored.name,
        "url": f"/runs/{quote(stored.workflow_id, safe='')}/latest/files/"
        f"{quote(stored.name, safe='')}",
        "binary": True,
        "note": note,
    }


async def _read_span(store: FileStore, stored: StoredFile, offset: int, count: int) -> bytes:
    """Bytes ``offset`` to ``offset + count`` of the file (read chunk by chunk)."""
    out = bytearray()
    position = 0
    async for piece in store.open(stored):
        end = position + len(piece)
        if end > offset:
            out += piece[max(0, offset - position) : offset + count - position]
        position = end
        if len(out) >= count or position >= offset + count:
            break
    return bytes(out[:count])


async def read_run_file(path: str, offset: int = 0) -> dict[str, Any]:
    """Read ``path`` of the current run's files (see the module docstring).

    Raises:
        ToolError: an unsafe path, an unknown file, an offset past its end, or no run.
    """
    files = _current()
    assert files.store is not None
    try:
        name = safe_artifact_path(path.strip().removeprefix("./"))
    except ValidationFailed as exc:
        raise ToolError(f"path '{path}' is refused: {exc.detail}") from exc
    try:
        stored = await files.store.get(
            tenant_id=files.tenant_id, workflow_id=files.workflow_id, name=name
        )
    except NotFound as exc:
        raise ToolError(f"no file '{name}' in this run's files") from exc
    if offset < 0 or (offset > 0 and offset >= stored.size):
        raise ToolError(f"offset {offset} is outside '{name}' ({stored.size} bytes)")
    media = stored.content_type.split(";", 1)[0].strip().lower()
    if not _is_text_type(media) and media != DEFAULT_CONTENT_TYPE:
        return file_reference(stored, f"{media} is not text: given by reference, not read")
    data = await _read_span(files.store, stored, offset, files.max_bytes)
    decoded = _utf8_prefix(data)
    if decoded is None:
        return file_reference(stored, "not UTF-8 text: given by reference, not read")
    text, used = decoded
    end = offset + used
    return {
        "name": stored.name,
        "content_type": stored.content_type,
        "size": stored.size,
        "offset": offset,
        "text": text,
        "next_offset": end if end < stored.size else None,
        "truncated": end < stored.size,
    }
