"""Liveness and readiness probes.

``/readyz`` is public (orchestrators probe it without credentials) so it tells
anonymous callers only whether the gateway is ready; the per-dependency checks,
whose details name addresses and errors, go to authenticated callers only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from fastapi import APIRouter, Response

from spindle.gateway.api.deps import (
    ArchiveDep,
    BusDep,
    OptionalIdentityDep,
    SettingsDep,
    TemporalDep,
)
from spindle.gateway.models import CheckResult, HealthStatus, ReadyStatus

router = APIRouter(tags=["health"])

READY_TIMEOUT = 2.0


@router.get("/healthz", response_model=HealthStatus, summary="The process is alive (no I/O)")
async def healthz() -> HealthStatus:
    return HealthStatus()


@router.get(
    "/readyz",
    response_model=ReadyStatus,
    summary="Temporal, Redis and MongoDB answer (the checks: authenticated callers only)",
    responses={503: {"model": ReadyStatus, "description": "a dependency is down"}},
)
async def readyz(
    response: Response,
    *,
    temporal: TemporalDep,
    bus: BusDep,
    archive: ArchiveDep,
    settings: SettingsDep,
    identity: OptionalIdentityDep,
) -> ReadyStatus:
    async def temporal_ok() -> bool:
        return await temporal.service_client.check_health(timeout=timedelta(seconds=READY_TIMEOUT))

    checks: dict[str, Callable[[], Awaitable[bool]]] = {
        "temporal": temporal_ok,
        "redis": bus.ping,
    }
    if settings.archive_enabled:
        checks["mongo"] = archive.ping
    results = await asyncio.gather(*(_check(fn) for fn in checks.values()))
    status = ReadyStatus(
        status="ready" if all(r.ok for r in results) else "unavailable",
        checks=dict(zip(checks, results, strict=True)) if identity is not None else {},
    )
    if status.status != "ready":
        response.status_code = 503
        response.headers["Retry-After"] = "5"
    return status


async def _check(probe: Callable[[], Awaitable[bool]]) -> CheckResult:
    started = time.perf_counter()
    try:
        ok = await asyncio.wait_for(probe(), READY_TIMEOUT)
        detail = None if ok else "no answer"
    except TimeoutError:
        ok, detail = False, f"no answer within {READY_TIMEOUT:.0f}s"
    except Exception as exc:
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:300]
    return CheckResult(
        ok=ok, latency_ms=round((time.perf_counter() - started) * 1000, 2), detail=detail
    )
