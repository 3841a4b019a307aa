"""Request bodies sent as JSON or YAML (``PUT /graphs/{name}``).

A graph is usually written in YAML, so the graph registry reads either, by the
request's ``Content-Type`` (docs/api/index.md, "Registering a graph"). A YAML body
is held to what a JSON body is (``spindle.gateway.http.body_limit``): no aliases
(an alias expands to a copy of its anchor, so a small document can stand for a huge
one), no ``.nan``/``.inf``, no nesting deeper than JSON allows. Dates and times
become their ISO text.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import yaml
from fastapi import Request

from spindle.gateway.http.body_limit import json_body_problem
from spindle.gateway.http.problems import UnsupportedMediaType
from spindle.shared.contracts.errors import InvalidRequest, ValidationFailed

YAML_MEDIA_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def read_document(request: Request) -> Any:
    """The body of ``request``, parsed as JSON or YAML by its ``Content-Type``.

    No ``Content-Type`` reads as JSON (as FastAPI does).

    Raises:
        InvalidRequest: the body is not valid JSON/YAML (400, naming line and column),
            or holds what JSON cannot (aliases, NaN, too deep).
        UnsupportedMediaType: neither JSON nor YAML (415).
        ValidationFailed: the body is empty (422).
    """
    media = _media_type(request)
    body = await request.body()
    if not body.strip():
        raise ValidationFailed(
            "the request has no body: send a graph as JSON or YAML",
            errors=[{"in": "body", "field": "body", "rule": "missing", "message": "no body"}],
        )
    if media in YAML_MEDIA_TYPES:
        return load_yaml(body)
    if media in ("", "application/json") or media.endswith("+json"):
        return _load_json(body)
    raise UnsupportedMediaType(
        f"the request body was sent with Content-Type '{media}'; send it as "
        "application/json or application/yaml",
        errors=[{"in": "header", "field": "Content-Type", "rule": "media_type"}],
    )


def _load_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise _syntax_error("JSON", exc.msg, exc.lineno, exc.colno) from exc
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise _syntax_error("JSON", str(exc), None, None) from exc


def _syntax_error(kind: str, reason: str, line: int | None, column: int | None) -> InvalidRequest:
    where = f" (line {line}, column {column})" if line is not None else ""
    error: dict[str, Any] = {
        "in": "body",
        "field": "body",
        "rule": f"{kind.lower()}_invalid",
        "message": reason,
    }
    if line is not None:
        error |= {"line": line, "column": column}
    return InvalidRequest(f"request body is not valid {kind}: {reason}{where}", errors=[error])


def load_yaml(body: bytes) -> Any:
    """One YAML document as JSON values.

    Raises:
        InvalidRequest: bad YAML (line and column of the mistake, 1-based), an alias,
            or a value JSON cannot hold.
    """
    try:
        text = body.decode("utf-8-sig")
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                at = event.start_mark
                line, column = (at.line + 1, at.column + 1) if at is not None else (None, None)
                raise _syntax_error("YAML", "aliases (*name) are not accepted", line, column)
        value = yaml.safe_load(text)
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8: byte {exc.start} ({exc.reason})"
        raise _syntax_error("YAML", reason, None, None) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(p for p in (exc.context, exc.problem) if p) or "YAML error"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        raise _syntax_error("YAML", reason, line, column) from exc
    except yaml.YAMLError as exc:
        raise _syntax_error("YAML", str(exc), None, None) from exc
    try:
        as_json = json.dumps(value, allow_nan=False, default=_iso).encode()
    except (ValueError, RecursionError) as exc:
        raise _syntax_error("YAML", f"a value JSON cannot hold: {exc}", None, None) from exc
    problem = json_body_problem(as_json)
    if problem is not None:
        raise problem
    return json.loads(as_json)


def _iso(value: Any) -> str:
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    raise ValueError(f"{type(value).__name__} is not a JSON value")
