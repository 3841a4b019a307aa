"""Request-body limits: the size of every body, and the shape of JSON bodies.

Size. A declared ``Content-Length`` above the limit is answered at once with a
413 problem, without handing the request to a route. Bodies without a length
(chunked) are counted as they are read; going over raises a 413 inside the
route. Either way the rest of the body is read and discarded first (up to
``DRAIN_FACTOR`` times the limit): a server that answers and closes while the
client is still uploading makes most clients report a broken connection
instead of the 413. ``multipart/form-data`` bodies (file uploads) have a limit
of their own, the upload limit plus room for the part headers.

JSON shape. A JSON body (``application/json`` or ``…+json``) is checked when
its last byte arrives, before the route parses it, for what Python's parser
lets through but the rest of Spindle cannot carry: nesting deeper than
``MAX_JSON_DEPTH`` (Temporal's payload decoder gives up at 200 levels and
MongoDB at 100, so a run started with such input could never run or be
archived), ``NaN``/``Infinity``, numbers too big for a double, lone UTF-16
surrogates (none of them JSON under RFC 8259; the message bus cannot encode
them), integers outside 64 bits and object keys containing U+0000 (BSON
cannot store either). Each is a 400 or 422 problem naming the rule. A body
that is plainly malformed is left to the route, which reports where (a REST
route as a 400 problem; the JSON-RPC endpoints as their own parse error).
The JSON-RPC endpoints (``JSON_RPC_PATHS``, A2A's too) skip this middleware's
shape check and run ``json_body_problem`` in their parser instead, so their
answer is a JSON-RPC error (-32600 / -32602), not a problem body.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Collection
from itertools import accumulate
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spindle.gateway.http.problems import ProblemHTTPException, spindle_problem
from spindle.shared.contracts.errors import (
    InvalidRequest,
    PayloadTooLarge,
    SpindleError,
    ValidationFailed,
)

DRAIN_FACTOR = 16
MAX_JSON_DEPTH = 64
# Part headers and boundaries of a multipart upload, on top of the file itself.
MULTIPART_OVERHEAD = 64 * 1024
# JSON-RPC 2.0 answers a bad body with its own error object, not a problem.
JSON_RPC_PATHS = frozenset({"/", "/tasks"})

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_DIGIT_RUN = re.compile(rb"\d{19}")
# An integer token of 19+ digits: not a fraction, exponent or float mantissa.
_LONG_INTEGER = re.compile(rb"(?<![\d.eE+\-])-?\d{19,}(?![\d.eE])")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# Opening brackets to +1, closing ones to -1 (0xff read as a signed byte).
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UTF8_BOM = b"\xef\xbb\xbf"
_ESCAPED_NUL = b"\\u0000"


def json_body_problem(body: bytes, *, max_depth: int = MAX_JSON_DEPTH) -> SpindleError | None:
    """What keeps a JSON body from being accepted, or None.

    None also for a body that is not JSON at all: the caller's own parser
    reports that with the position of the mistake.

    Args:
        body: the whole request body.
        max_depth: the deepest nesting of arrays and objects allowed.
    """
    body = body.removeprefix(_UTF8_BOM)
    digits = _DIGIT_RUN.search(body) is not None
    deep = body.count(b"[") + body.count(b"{") > max_depth
    skeleton = _JSON_STRING.sub(b'""', body) if digits or deep else body
    if deep and _nests_deeper_than(skeleton, max_depth):
        return InvalidRequest(
            f"request body nests arrays and objects deeper than {max_depth} levels",
            errors=[
                {
                    "in": "body",
                    "field": "body",
                    "rule": "max_depth",
                    "limit": max_depth,
                    "message": f"at most {max_depth} levels of nesting",
                }
            ],
        )
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if _malformed(body):
            return None
        return InvalidRequest(
            f"request body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            errors=[
                {
                    "in": "body",
                    "field": "body",
                    "rule": "json_invalid",
                    "position": exc.pos,
                    "message": exc.msg,
                }
            ],
        )
    if _ESCAPED_NUL in body:
        key_path = _key_with_nul(value)
        if key_path is not None:
            return ValidationFailed(
                f"request body has an object key with a NUL character at {key_path}",
                errors=[
                    {
                        "in": "body",
                        "field": key_path,
                        "rule": "nul_in_key",
                        "message": "object keys must not contain U+0000",
                    }
                ],
            )
    if digits:
        for match in _LONG_INTEGER.finditer(skeleton):
            token = match.group()
            # JSON has no leading zeros: past 19 digits a number is out of range.
            if len(token.lstrip(b"-")) > 19 or not _INT64_MIN <= int(token) <= _INT64_MAX:
                shown = token[:40].decode()
                return ValidationFailed(
                    f"request body has the integer {shown}, which does not fit in 64 bits",
                    errors=[
                        {
                            "in": "body",
                            "field": "body",
                            "rule": "int64_range",
                            "message": f"integers must lie in [{_INT64_MIN}, {_INT64_MAX}]",
                        }
                    ],
                )
    return None


def _nests_deeper_than(skeleton: bytes, max_depth: int) -> bool:
    """Running sum of +1 per opening and -1 per closing bracket, in C loops."""
    steps = array("b", skeleton.translate(None, _NOT_BRACKETS).translate(_BRACKET_STEPS))
    return max(accumulate(steps), default=0) > max_depth


def _key_with_nul(value: Any) -> str | None:
    """The path of the first object key that contains U+0000, if any."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                shown = json.dumps(key)[1:-1]  # U+0000 as \u0000
                child_path = f"{path}.{shown}" if path else shown
                if "\x00" in key:
                    return child_path
                pending.append((child_path, child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def _malformed(body: bytes) -> bool:
    """True when Python's own JSON parser refuses the body too."""
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return True
    return False


class ContentLengthLimit:
    """Pure ASGI middleware: 413 for a body above its limit, 400/422 for JSON
    bodies Spindle cannot carry (see the module docstring).

    Args:
        app: the wrapped application.
        max_bytes: the largest body (``Settings.max_body_bytes``).
        max_upload_bytes: the largest file in a ``multipart/form-data`` body
            (``Settings.max_upload_bytes``); default ``max_bytes``.
        max_json_depth: the deepest nesting of a JSON body.
        json_exempt_paths: paths whose JSON bodies are only size-checked.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        *,
        max_upload_bytes: int | None = None,
        max_json_depth: int = MAX_JSON_DEPTH,
        json_exempt_paths: Collection[str] = JSON_RPC_PATHS,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_multipart_bytes = max(max_bytes, (max_upload_bytes or 0) + MULTIPART_OVERHEAD)
        self.max_json_depth = max_json_depth
        self.json_exempt_paths = frozenset(json_exempt_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        media_type = _media_type(scope)
        limit = self.max_multipart_bytes if media_type == "multipart/form-data" else self.max_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            error = PayloadTooLarge(f"request body is {declared} bytes; the limit is {limit} bytes")
            response = spindle_problem(error, scope.get("path"))
            if declared > limit * DRAIN_FACTOR or not await _drain(receive, limit):
                response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
        receive = _counting(receive, limit)
        if _is_json(media_type) and scope.get("path") not in self.json_exempt_paths:
            receive = _json_checked(receive, self.max_json_depth)
        await self.app(scope, receive, send)


async def _drain(receive: Receive, limit: int, seen: int = 0) -> bool:
    """Read and drop the rest of the body; False if it is too long to drain."""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return False
        seen += len(message.get("body", b""))
        if seen > limit * DRAIN_FACTOR:
            return False
        if not message.get("more_body", False):
            return True


def _counting(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                if message.get("more_body", False):
                    await _drain(receive, limit, seen)
                raise ProblemHTTPException(
                    PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
                )
        return message

    return counted


def _json_checked(receive: Receive, max_depth: int) -> Receive:
    chunks: list[bytes] = []

    async def checked() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                body = b"".join(chunks)
                chunks.clear()
                problem = json_body_problem(body, max_depth=max_depth) if body.strip() else None
                if problem is not None:
                    raise ProblemHTTPException(problem)
        return message

    return checked


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def _content_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _media_type(scope: Scope) -> str:
    value = _header(scope, b"content-type") or b""
    return value.split(b";", 1)[0].strip().lower().decode("latin-1")


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )
