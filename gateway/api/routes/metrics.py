"""``GET /metrics``: this gateway process's Prometheus metrics (``shared.platform.metrics``).

Public like the health probes: it carries counts only, no tenant data.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from spindle.shared.platform import metrics

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    summary="Prometheus metrics of this gateway process (text exposition format)",
    response_class=Response,
    responses={200: {"content": {metrics.CONTENT_TYPE: {}}, "description": "metrics"}},
)
async def prometheus_metrics() -> Response:
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)
