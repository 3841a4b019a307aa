"""The params of the ``tasks.*`` methods, validated into typed models.

A violation becomes ``ValidationFailed`` (-32602) whose ``data`` names the
field (dotted path, list positions in brackets) and the reason.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from spindle.shared.contracts.errors import ValidationFailed
from spindle.shared.contracts.tasks import (
    DEFAULT_PRIORITY,
    MAX_NAME_LENGTH,
    MAX_PRIORITY,
    MIN_PRIORITY,
    TaskDependency,
    TaskSchemas,
    TaskStatus,
    is_uuid,
    normalize_dependencies,
)

MAX_LIST_LIMIT = 1000
DEFAULT_LIST_LIMIT = 100
MAX_TREE_CREATE = 1000

ParamsT = TypeVar("ParamsT", bound=BaseModel)


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """``("updates", "dependencies", 0, "id")`` → ``updates.dependencies[0].id``."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path or "params"


def validation_failed(exc: ValidationError, prefix: str = "") -> ValidationFailed:
    """``ValidationFailed`` naming every field and reason of ``exc``."""
    errors = [
        {"field": field_path(tuple(err["loc"]), prefix), "reason": err["msg"]}
        for err in exc.errors(include_url=False)
    ]
    summary = "; ".join(f"{e['field']}: {e['reason']}" for e in errors)
    return ValidationFailed(summary, errors=errors)


def invalid(field: str, reason: str) -> ValidationFailed:
    """``ValidationFailed`` for one field."""
    return ValidationFailed(f"{field}: {reason}", errors=[{"field": field, "reason": reason}])


def parse(model: type[ParamsT], params: dict[str, Any], prefix: str = "") -> ParamsT:
    """``params`` validated as ``model`` (or ``ValidationFailed``)."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise validation_failed(exc, prefix) from exc


def require_uuid(value: str, field: str) -> str:
    if not is_uuid(value):
        raise invalid(field, "Invalid UUID format")
    return value


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskDraft(_Params):
    """One task to create (``tasks.create``; each member of ``tasks`` for a tree).

    ``id`` is a client-side reference only, so members of one tree can name
    each other in ``parent_id`` and ``dependencies``; the server always
    generates the stored UUID.
    """

    id: str | None = Field(default=None, min_length=1, max_length=256)
    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    user_id: str | None = Field(default=None, min_length=1, max_length=256)
    parent_id: str | None = Field(default=None, min_length=1, max_length=256)
    priority: StrictInt = Field(default=DEFAULT_PRIORITY, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    inputs: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    schemas: TaskSchemas = Field(default_factory=TaskSchemas)
    dependencies: list[TaskDependencyRef] = Field(default_factory=list)


class TaskDependencyRef(_Params):
    """A dependency as a client writes it: a stored task's UUID or a tree member's ref."""

    id: str = Field(min_length=1, max_length=256)
    required: StrictBool = True


class TreeCreateParams(_Params):
    tasks: list[TaskDraft] = Field(min_length=1, max_length=MAX_TREE_CREATE)


class TaskIdParams(_Params):
    task_id: str


class UpdateParams(_Params):
    task_id: str
    updates: dict[str, Any]


class DeleteParams(_Params):
    task_id: str
    cascade: StrictBool = False


class ListParams(_Params):
    limit: StrictInt = Field(default=DEFAULT_LIST_LIMIT, ge=1, le=MAX_LIST_LIMIT)
    offset: StrictInt = Field(default=0, ge=0)
    status: TaskStatus | None = None
    user_id: str | None = Field(default=None, min_length=1, max_length=256)


class ChildrenParams(_Params):
    parent_id: str


class CopyParams(_Params):
    task_id: str
    copy_children: StrictBool = False


def parse_draft(params: dict[str, Any], prefix: str = "") -> TaskDraft:
    body = dict(params)
    if "dependencies" in body:
        body["dependencies"] = normalize_dependencies(body["dependencies"])
    return parse(TaskDraft, body, prefix)


def stored_dependencies(refs: list[TaskDependencyRef]) -> list[TaskDependency]:
    return [TaskDependency(id=ref.id, required=ref.required) for ref in refs]


TaskDraft.model_rebuild()


class TaskUpdates(_Params):
    """The fields ``tasks.update`` may set (each optional; absent = unchanged)."""

    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_LENGTH)
    priority: StrictInt | None = Field(default=None, ge=MIN_PRIORITY, le=MAX_PRIORITY)
    inputs: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    schemas: TaskSchemas | None = None
    dependencies: list[TaskDependencyRef] | None = None
    parent_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: str | None = Field(default=None, min_length=1, max_length=256)
    status: TaskStatus | None = None
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    result: Any = None
    error: str | None = None


# Fields whose explicit null is meaningful (clear the value) rather than invalid.
NULLABLE_UPDATES = frozenset({"parent_id", "result", "error"})
