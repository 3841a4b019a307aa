"""The a2a-sdk's A2A 0.3 JSON-RPC adapter, with its protocol defects corrected.

``JSONRPC03Adapter`` (a2a-sdk 1.3.0) answers a request whose ``params`` do not
validate with -32600 Invalid Request and ``str()`` of the pydantic error as
``data``; JSON-RPC 2.0 and A2A 0.3 say -32602 Invalid params for bad
parameters, and the raw dump is noise to a client. It also answers
``tasks/pushNotificationConfig/delete`` without a ``result`` member (it drops
the ``null`` with ``exclude_none``), which JSON-RPC 2.0 requires on success.
It also takes a message part without ``kind`` as a text part, where the 0.3
schema requires ``kind`` (``text``, ``file`` or ``data``) on every part.
This subclass validates first, answering -32602 with one ``{"field",
"message"}`` per problem (-32600 only when the envelope itself is wrong), and
puts ``"result": null`` back.
"""

from __future__ import annotations

from typing import Any

import orjson
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from pydantic import ValidationError
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
DELETE_PUSH_CONFIG = "tasks/pushNotificationConfig/delete"
ENVELOPE = frozenset({"jsonrpc", "id", "method"})
PART_KINDS = ("text", "file", "data")
SENDS = frozenset({"message/send", "message/stream"})


def _field(location: tuple[int | str, ...]) -> str:
    out = ""
    for part in location:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validation_error(request_id: str | int | None, exc: ValidationError) -> dict[str, Any]:
    """The JSON-RPC error object for a request that does not validate."""
    problems = [
        {"field": _field(tuple(error["loc"])), "message": error["msg"]}
        for error in exc.errors(include_url=False, include_input=False)
    ]
    envelope = any(p["field"].split(".")[0].split("[")[0] in ENVELOPE for p in problems)
    code, what = (
        (INVALID_REQUEST, "Invalid Request") if envelope else (INVALID_PARAMS, "Invalid params")
    )
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5])
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": f"{what}: {summary}", "data": {"errors": problems}},
    }


class SpindleJSONRPC03Adapter(JSONRPC03Adapter):
    """``JSONRPC03Adapter`` with -32602 for bad params and a ``result`` on delete."""

    async def handle_request(
        self,
        request_id: str | int | None,
        method: str,
        body: dict[str, Any],
        request: Request,
    ) -> JSONResponse | EventSourceResponse:
        model = self.METHOD_TO_MODEL[method]
        try:
            model.model_validate(body)  # type: ignore[attr-defined]
        except ValidationError as exc:
            return JSONResponse(validation_error(request_id, exc))
        problems = _part_kind_problems(body) if method in SENDS else []
        if problems:
            return JSONResponse(_invalid_params(request_id, problems))
        response = await super().handle_request(request_id, method, body, request)
        if method == DELETE_PUSH_CONFIG and not isinstance(response, EventSourceResponse):
            return _with_result(response)
        return response


def _part_kind_problems(body: dict[str, Any]) -> list[dict[str, str]]:
    """A problem per message part whose ``kind`` is missing or unknown."""
    params = body.get("params")
    message = params.get("message") if isinstance(params, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    problems = []
    for index, part in enumerate(parts if isinstance(parts, list) else []):
        kind = part.get("kind") if isinstance(part, dict) else None
        if kind not in PART_KINDS:
            problems.append(
                {
                    "field": f"params.message.parts[{index}].kind",
                    "message": f"must be one of {', '.join(PART_KINDS)} (got {kind!r})",
                }
            )
    return problems


def _invalid_params(request_id: str | int | None, problems: list[dict[str, str]]) -> dict[str, Any]:
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems[:5])
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": INVALID_PARAMS,
            "message": f"Invalid params: {summary}",
            "data": {"errors": problems},
        },
    }


def _with_result(response: Response) -> JSONResponse:
    answer: dict[str, Any] = orjson.loads(bytes(response.body))
    if "error" not in answer:
        answer.setdefault("result", None)
    return JSONResponse(answer, status_code=response.status_code)
