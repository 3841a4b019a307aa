"""Files of a run: upload (multipart), list, download.

Files belong to the run's tenant and are stored by ``spindle.shared.store.file_store``; the
run dependencies answer 404 for an unknown run or another tenant's, exactly
alike. An upload's name is checked by ``safe_file_name`` (422 naming the rule
for path traversal and other dangerous names); a download's may be an artifact
path (``files/ws-1/result.md``, checked by ``safe_artifact_path``: ``..``, empty
segments and absolute paths are a 422 too). An upload above
``Settings.max_upload_bytes`` is a 413 and nothing of it is kept. Uploading a
name again replaces the file. Downloads are always attachments, with
``X-Content-Type-Options: nosniff``, so a stored HTML or SVG file never runs in
the gateway's origin. A delete (``DELETE /runs/{workflow_id}/files/{name}``) is
owner-checked like an upload and removes every stored version; the agent's
``read_file`` then reports the file as not found (docs/conversations.md, Uploads).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, File, Header, Response, UploadFile, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from spindle.gateway.api.deps import (
    CallerDep,
    ControllableRunDep,
    FileStoreDep,
    IdentityDep,
    ReadableRunDep,
    SettingsDep,
)
from spindle.gateway.services import run_input
from spindle.shared.contracts.errors import PayloadTooLarge, ValidationFailed
from spindle.shared.contracts.runs import FileUploaded
from spindle.shared.store.file_store import StoredFile, safe_artifact_path, safe_file_name

router = APIRouter(tags=["files"])

READ_SIZE = 256 * 1024
# Characters RFC 5987 ``attr-char`` allows unencoded, besides letters and digits.
_ATTR_CHAR_SAFE = "!#$&+-.^_`|~"

FILE_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    404: {"description": "unknown run or file, or another tenant's (problem+json)"},
}
UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **FILE_RESPONSES,
    403: {"description": "only the run's owner or a run-control role may upload"},
    413: {"description": "the file is larger than max_upload_bytes (problem+json)"},
    422: {"description": "missing file part or unsafe file name, naming the rule"},
}


class FileList(BaseModel):
    """A run's files, by name."""

    files: list[StoredFile]


def content_disposition(name: str) -> str:
    """``attachment`` with an ASCII ``filename`` and, for other names, ``filename*`` (RFC 6266)."""
    fallback = "".join(ch if " " <= ch <= "~" and ch not in '"\\%' else "_" for ch in name)
    value = f'attachment; filename="{fallback}"'
    if fallback != name:
        value += f"; filename*=UTF-8''{quote(name, safe=_ATTR_CHAR_SAFE)}"
    return value


def file_url(workflow_id: str, run_id: str, name: str) -> str:
    return (
        f"/runs/{quote(workflow_id, safe='')}/{quote(run_id, safe='')}/files/{quote(name, safe='')}"
    )


async def _pieces(upload: UploadFile) -> AsyncIterator[bytes]:
    while piece := await upload.read(READ_SIZE):
        yield piece


@router.post(
    "/runs/{workflow_id}/{run_id}/files",
    status_code=201,
    response_model=StoredFile,
    summary="Upload a file to a run (multipart field `file`; the same name replaces it)",
    responses=UPLOAD_RESPONSES,
)
async def upload_file(
    workflow_id: str,
    run_id: str,
    file: Annotated[UploadFile, File(description="the file; its name is the stored name")],
    *,
    run: ControllableRunDep,
    identity: IdentityDep,
    store: FileStoreDep,
    settings: SettingsDep,
    response: Response,
    caller: CallerDep,
) -> StoredFile:
    if file.filename is None:
        raise ValidationFailed(
            "the file part has no file name",
            errors=[{"field": "name", "rule": "not_empty", "message": "no filename given"}],
        )
    name = safe_file_name(file.filename)
    limit = settings.max_upload_bytes
    if file.size is not None and file.size > limit:
        raise PayloadTooLarge(f"file '{name}' is {file.size} bytes; the limit is {limit} bytes")
    stored = await store.put(
        tenant_id=run.tenant_id,
        workflow_id=workflow_id,
        name=name,
        content_type=file.content_type or "application/octet-stream",
        chunks=_pieces(file),
        max_bytes=limit,
        uploaded_by=identity.user_id,
    )
    response.headers["Location"] = file_url(workflow_id, run_id, stored.name)
    # Seed 002: the agent is signaled via FileUploaded (docs/conversations.md, Uploads).
    upload = FileUploaded(
        name=stored.name,
        content_type=stored.content_type,
        size=stored.size,
        path=stored.name,
        uploaded_by=identity.user_id,
    )
    await run_input.file_uploaded(caller, workflow_id, upload)
    return stored


@router.get(
    "/runs/{workflow_id}/{run_id}/files",
    response_model=FileList,
    summary="List a run's files",
    responses=FILE_RESPONSES,
)
async def list_files(
    workflow_id: str, run_id: str, *, run: ReadableRunDep, store: FileStoreDep
) -> FileList:
    return FileList(files=await store.list(tenant_id=run.tenant_id, workflow_id=workflow_id))


@router.get(
    "/runs/{workflow_id}/{run_id}/files/{name:path}",
    summary="Download a run's file or artifact (ETag: its SHA-256)",
    response_class=StreamingResponse,
    responses={
        **FILE_RESPONSES,
        200: {"description": "the file's bytes", "content": {"application/octet-stream": {}}},
        422: {"description": "unsafe name or artifact path, naming the rule (problem+json)"},
        304: {"description": "If-None-Match matched the file's ETag"},
    },
)
async def download_file(
    workflow_id: str,
    run_id: str,
    name: str,
    *,
    run: ReadableRunDep,
    store: FileStoreDep,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    name = safe_artifact_path(name)
    stored = await store.get(tenant_id=run.tenant_id, workflow_id=workflow_id, name=name)
    etag = f'"{stored.sha256}"'
    headers = {
        "ETag": etag,
        # A browser saves an artifact path under its last segment.
        "Content-Disposition": content_disposition(stored.name.rsplit("/", 1)[-1]),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, no-cache",
    }
    if if_none_match is not None and _etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    headers["Content-Length"] = str(stored.size)
    return StreamingResponse(store.open(stored), media_type=stored.content_type, headers=headers)


@router.delete(
    "/runs/{workflow_id}/files/{name:path}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a run's file or artifact (every stored version of the name)",
    responses={
        **FILE_RESPONSES,
        403: {"description": "only the run's owner or a run-control role may delete"},
        422: {"description": "unsafe name or artifact path, naming the rule (problem+json)"},
    },
)
async def delete_file(
    workflow_id: str, name: str, *, run: ControllableRunDep, store: FileStoreDep
) -> Response:
    name = safe_artifact_path(name)
    await store.delete(tenant_id=run.tenant_id, workflow_id=workflow_id, name=name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _etag_matches(header: str, etag: str) -> bool:
    """RFC 9110 weak comparison for If-None-Match (``*`` matches any)."""
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in tags or etag in tags
