"""A run's output as A2A artifacts, or as the agent's reply message.

A graph decides how its A2A task ends through the shape of its output (the
output node's ``select``), with no A2A-specific setting (docs/protocols/a2a.md,
"Artifacts and message replies"):

- **Declared artifacts:** an object whose ``artifacts`` is a non-empty list of
  objects, each with a non-empty ``parts`` list (and optionally ``artifactId``,
  ``name``, ``description``, ``metadata``): each one is an artifact of the
  task, in order (``artifactId`` defaults to ``artifact-<index>``).
- **A message:** an object with a non-empty ``parts`` list and nothing else but
  ``role`` (``agent``), ``kind`` (``message``) and ``metadata``: a blocking send
  answers with that ``Message`` (A2A §3.1.1: "a Task or a Message"), the task
  keeps it as its completed status message and its parts as the ``result``
  artifact.
- Anything else is the ``result`` artifact (``task_mapping.result_artifact``).

A part is A2A 1.0's JSON (``{"text"}``, ``{"data"}``, ``{"raw"}`` with base64
bytes, ``{"url"}``, each with optional ``filename``, ``mediaType`` and
``metadata``) or 0.3's (``{"kind": "text" | "data" | "file", …}``, a file as
``{"bytes" | "uri", "name", "mimeType"}``). An output that looks declared but
does not parse (an unknown part, bad base64) is logged and shown whole as the
``result`` artifact, so the client still gets everything the run produced.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.types import Artifact, Part
from google.protobuf.json_format import ParseDict, ParseError

log = logging.getLogger(__name__)

REPLY_SUFFIX = "reply"
MESSAGE_KEYS = frozenset({"parts", "role", "kind", "metadata"})
AGENT_ROLES = frozenset({"agent", "ROLE_AGENT"})
ARTIFACT_KEYS = frozenset({"artifactId", "name", "description", "metadata", "parts"})


def _part_0_3(part: dict[str, Any]) -> dict[str, Any]:
    """A 0.3 part (``kind``) in 1.0 JSON; a 1.0 part unchanged."""
    kind = part.get("kind")
    if kind is None:
        return part
    shaped = {k: v for k, v in part.items() if k not in ("kind", "file")}
    if kind == "file" and isinstance(part.get("file"), dict):
        file = part["file"]
        if "bytes" in file:
            shaped["raw"] = file["bytes"]
        if "uri" in file:
            shaped["url"] = file["uri"]
        if file.get("name"):
            shaped["filename"] = file["name"]
        if file.get("mimeType"):
            shaped["mediaType"] = file["mimeType"]
    return shaped


def parse_parts(parts: list[Any]) -> list[Part]:
    """Parts in 1.0 or 0.3 JSON as A2A parts.

    Raises:
        ValueError: a part that is not an object or does not parse (names it).
    """
    parsed = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise ValueError(f"parts[{index}] is not an object")
        try:
            one = ParseDict(_part_0_3(part), Part())
        except ParseError as exc:
            raise ValueError(f"parts[{index}]: {exc}") from exc
        if one.WhichOneof("content") is None:
            raise ValueError(f"parts[{index}] has no text, data, raw or url")
        parsed.append(one)
    return parsed


def _has_parts(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("parts"), list) and bool(value["parts"])


def declared_artifacts(output: Any) -> list[Artifact] | None:
    """The artifacts an output declares (module docs); None when it declares none."""
    if not isinstance(output, dict):
        return None
    items = output.get("artifacts")
    if not isinstance(items, list) or not items or not all(_has_parts(i) for i in items):
        return None
    artifacts = []
    try:
        for index, item in enumerate(items):
            artifact = Artifact(
                artifact_id=str(item.get("artifactId") or f"artifact-{index}"),
                name=str(item.get("name") or ""),
                description=str(item.get("description") or ""),
                parts=parse_parts(item["parts"]),
            )
            if isinstance(item.get("metadata"), dict):
                artifact.metadata.update(item["metadata"])
            artifacts.append(artifact)
    except ValueError as exc:
        log.warning("a2a: the run's output declares artifacts that do not parse: %s", exc)
        return None
    return artifacts


def reply_parts(output: Any) -> list[Part] | None:
    """The parts of an output shaped like an agent message (module docs), else None."""
    if not _has_parts(output) or not set(output) <= MESSAGE_KEYS:
        return None
    if output.get("kind", "message") != "message" or output.get("role", "agent") not in AGENT_ROLES:
        return None
    try:
        return parse_parts(output["parts"])
    except ValueError as exc:
        log.warning("a2a: the run's output is shaped like a message but does not parse: %s", exc)
        return None
