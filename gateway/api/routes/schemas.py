"""Published JSON Schemas of the data Spindle's nodes exchange.

``GET /schemas/execution-payload``: seed 001's ``ExecutionPayload`` (items, context,
``meta.startTime`` / ``meta.lastNode``), from the model in
``spindle.shared.contracts.envelope``. Public, like ``GET /graphs/schema``: a schema
holds no tenant data (docs/graphs/envelopes.md#the-executionpayload-schema).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from spindle.shared.contracts.envelope import execution_payload_json_schema

router = APIRouter(tags=["graphs"])


@router.get(
    "/schemas/execution-payload",
    summary="The JSON Schema of seed 001's ExecutionPayload (public)",
)
async def get_execution_payload_schema() -> dict[str, Any]:
    return execution_payload_json_schema()
