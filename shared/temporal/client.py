"""The one way every Spindle process opens its Temporal client.

The gateway, the worker, the ``spindle`` command and the dev stack all call
``connect_temporal``, so they agree on the data converter (a run whose payloads
were offloaded to MongoDB can only be read back through it), the namespace,
TLS and API key (``Settings.temporal_*``, docs/operations/configuration.md) and
how a first connection is retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from temporalio.client import Client, Interceptor, Plugin
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from spindle.shared.contracts.errors import Unavailable
from spindle.shared.platform.settings import Settings
from spindle.shared.temporal.converter import data_converter

log = logging.getLogger(__name__)

# Seconds between tries of a first connection; doubles up to the cap.
FIRST_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 5.0


def tls_config(settings: Settings) -> TLSConfig | bool:
    """The TLS of ``settings``: ``False`` for plain gRPC, ``True`` for the system's
    roots, a ``TLSConfig`` when a CA, client certificate or key file is named.

    Raises:
        Unavailable: a named PEM file cannot be read, or a client certificate
            is named without its key (or the key without the certificate).
    """
    files = {
        "SPINDLE_TEMPORAL_TLS_CA_FILE": settings.temporal_tls_ca_file,
        "SPINDLE_TEMPORAL_TLS_CERT_FILE": settings.temporal_tls_cert_file,
        "SPINDLE_TEMPORAL_TLS_KEY_FILE": settings.temporal_tls_key_file,
    }
    if not any(files.values()):
        return settings.temporal_tls or settings.temporal_api_key is not None
    if bool(settings.temporal_tls_cert_file) != bool(settings.temporal_tls_key_file):
        # Refused here, naming the variables, rather than later inside the SDK.
        raise Unavailable(
            "Temporal mutual TLS needs both SPINDLE_TEMPORAL_TLS_CERT_FILE and "
            "SPINDLE_TEMPORAL_TLS_KEY_FILE"
        )
    ca, cert, key = (_read_pem(path, variable) for variable, path in files.items())
    return TLSConfig(server_root_ca_cert=ca, client_cert=cert, client_private_key=key)


def _read_pem(path: str | None, variable: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise Unavailable(f"Temporal TLS file {path} ({variable}): {exc.strerror or exc}") from exc


async def connect_temporal(
    settings: Settings,
    *,
    lazy: bool = False,
    interceptors: Sequence[Interceptor] = (),
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
) -> Client:
    """A Temporal client with Spindle's data converter, namespace and TLS.

    Args:
        settings: where Temporal is and how to reach it.
        lazy: connect on first use (the gateway starts and answers 503 while
            Temporal is down) instead of now.
        interceptors: client interceptors (tracing); a worker built on the
            client inherits them.
        plugins: Temporal client plug-ins.
        runtime: the SDK runtime (the worker's carries its metrics).

    Raises:
        Unavailable: Temporal did not answer after
            ``Settings.temporal_connect_attempts`` tries, naming the address and
            the variable that sets it.
    """
    attempts = 1 if lazy else settings.temporal_connect_attempts
    delay = FIRST_RETRY_DELAY
    # Read once: the PEM files and the converter's codec do not change between tries.
    converter, tls = data_converter(settings), tls_config(settings)
    for attempt in range(1, attempts + 1):
        try:
            return await Client.connect(
                settings.temporal_address,
                namespace=settings.temporal_namespace,
                data_converter=converter,
                tls=tls,
                api_key=settings.temporal_api_key,
                interceptors=interceptors,
                plugins=plugins,
                runtime=runtime,
                lazy=lazy,
            )
        except RuntimeError as exc:  # the SDK's "Failed client connect: …"
            if attempt == attempts:
                raise Unavailable(
                    f"Temporal at {settings.temporal_address} (SPINDLE_TEMPORAL_ADDRESS): {exc}"
                ) from exc
            log.warning(
                "Temporal at %s not reachable (try %d of %d): %s",
                settings.temporal_address,
                attempt,
                attempts,
                exc,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_DELAY)
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["connect_temporal", "tls_config"]
