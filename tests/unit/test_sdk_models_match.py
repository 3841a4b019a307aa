"""The SDK's models (``spindle.client``) read every field the gateway answers.

The SDK keeps its own copies of the gateway's response bodies (it may import only
``spindle.shared.contracts``), so they can drift. Each route the SDK calls is
looked up in the gateway app as it serves it (method and path, not the module a
model lives in), and every field of its response model, nested models included,
must have a counterpart in the SDK's model under the name on the wire.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any, Union, get_args, get_origin

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import AliasChoices, AliasPath, BaseModel

from spindle.client import (
    Accepted,
    RunBundle,
    RunInfo,
    RunPage,
    StartedRun,
    StreamToken,
    UploadedFile,
)
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit

# (method, path as the gateway routes it, field of the answer or "" for the whole
# answer, the SDK model that reads it); the SDK's calls in spindle/client/async_client.py.
SDK_READS: list[tuple[str, str, str, type[BaseModel]]] = [
    ("POST", "/runs", "", StartedRun),
    ("GET", "/runs", "", RunPage),
    ("GET", "/runs/{workflow_id}", "", RunInfo),
    ("GET", "/runs/{workflow_id}/bundle", "", RunBundle),
    ("POST", "/runs/{workflow_id}/cancel", "", Accepted),
    ("POST", "/runs/{workflow_id}/terminate", "", Accepted),
    ("POST", "/runs/{workflow_id}/stream-token", "", StreamToken),
    ("POST", "/runs/{workflow_id}/{run_id}/files", "", UploadedFile),
    ("GET", "/runs/{workflow_id}/{run_id}/files", "files", UploadedFile),
]


@pytest.fixture(scope="module")
def gateway_app() -> FastAPI:
    from spindle.gateway.app import create_app

    return create_app(Settings(auth_disabled=True))


def response_model(app: FastAPI, method: str, path: str) -> type[BaseModel]:
    """The model of a route's 200 answer (declared, or documented when the route
    writes its bytes itself)."""
    # Included routers are flattened with their prefixes, as the app routes requests.
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute):
            continue
        if route.path == path and method in (route.methods or ()):
            declared = route.response_model or (route.responses or {}).get(200, {}).get("model")
            assert isinstance(declared, type) and issubclass(declared, BaseModel), (
                f"{method} {path} declares no response model"
            )
            return declared
    raise AssertionError(f"the gateway serves no {method} {path}")


def wire_name(name: str, model: type[BaseModel]) -> str:
    """The key a field has in the gateway's JSON (FastAPI serialises by alias)."""
    info = model.model_fields[name]
    return info.serialization_alias or info.alias or name


def names_read(name: str, model: type[BaseModel]) -> set[str]:
    """The keys an SDK model's field is read from."""
    info = model.model_fields[name]
    names = {info.alias or name}
    if info.alias is None or model.model_config.get("populate_by_name"):
        names.add(name)
    alias = info.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    for choice in choices:
        if isinstance(choice, str):
            names.add(choice)
        elif isinstance(choice, AliasPath) and isinstance(choice.path[0], str):
            names.add(choice.path[0])
    return names


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X | None``, ``list[X]``, ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType) or get_args(annotation):
        return [model for arg in get_args(annotation) for model in models_in(arg)]
    return []


def missing_fields(gateway: type[BaseModel], sdk: type[BaseModel], where: str) -> Iterator[str]:
    """``where.field`` for each gateway field the SDK model does not read, and
    for each field missing from the models nested in both."""
    read = {key: name for name in sdk.model_fields for key in names_read(name, sdk)}
    for name, info in gateway.model_fields.items():
        key = wire_name(name, gateway)
        if key not in read:
            yield f"{where}.{key}"
            continue
        nested = models_in(info.annotation)
        sdk_nested = models_in(sdk.model_fields[read[key]].annotation)
        for inner in nested:
            # A model both import (shared.contracts) is the same on both sides; a
            # field the SDK keeps as a plain dict reads whatever it holds.
            if inner in sdk_nested or not sdk_nested:
                continue
            assert len(sdk_nested) == 1, f"{where}.{key}: which SDK model is {inner.__name__}?"
            yield from missing_fields(inner, sdk_nested[0], f"{where}.{key}")


def answer_model(app: FastAPI, method: str, path: str, field: str) -> type[BaseModel]:
    model = response_model(app, method, path)
    if not field:
        return model
    (inner,) = models_in(model.model_fields[field].annotation)
    return inner


@pytest.mark.parametrize(
    ("method", "path", "field", "sdk"),
    SDK_READS,
    ids=[f"{method} {path} {sdk.__name__}" for method, path, _, sdk in SDK_READS],
)
def test_the_sdk_model_reads_every_field_the_gateway_answers(
    gateway_app: FastAPI, method: str, path: str, field: str, sdk: type[BaseModel]
) -> None:
    gateway = answer_model(gateway_app, method, path, field)
    missing = list(missing_fields(gateway, sdk, sdk.__name__))
    assert not missing, (
        f"{method} {path} answers {gateway.__module__}.{gateway.__name__}; the SDK's "
        f"spindle.client.{sdk.__name__} lacks {missing}"
    )


def test_the_comparison_notices_a_missing_field_also_in_a_nested_model() -> None:
    class Budget(BaseModel):
        used: float
        limit: float

    class Answer(BaseModel):
        workflow_id: str
        trace_id: str | None = None
        budget: Budget | None = None

    class SdkBudget(BaseModel):
        used: float

    class SdkAnswer(BaseModel):
        workflow_id: str
        budget: SdkBudget | None = None

    assert list(missing_fields(Answer, SdkAnswer, "SdkAnswer")) == [
        "SdkAnswer.trace_id",
        "SdkAnswer.budget.limit",
    ]
