"""Delivery isolation per outbound destination: a concurrency cap and a breaker.

Every call Spindle makes to a caller-chosen URL (push notifications, run
webhooks, MCP streamable-HTTP servers) goes to a *destination*, its host and
port. One tenant's slow or dead destination must only cost that tenant, so a
process keeps, per destination:

- how many calls are in flight, capped at ``per_destination`` (a hanging
  server ties up at most that many slots, never the whole process);
- a breaker: after ``breaker_failures`` failures in a row the destination is
  held for ``breaker_seconds``; the first call after that tries it again
  (one success closes the breaker, one more failure opens it again).

The push outbox checks and counts without waiting (``has_room``, ``take``,
``give``: its dispatcher skips busy destinations and goes on); a direct caller
such as the MCP client waits for a slot with ``slot``. docs/protocols/outbound.md
("Outbound requests") describes both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)


# Full stops IDNA (UTS #46) maps to "." when a name is encoded for DNS: "127。0。0。1"
# and "localhost｡" reach the same hosts as their ASCII spellings.
IDNA_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def normalize_host(host: str) -> str:
    """``host`` as DNS will see it: IDNA full stops as ".", lower case, no trailing dot."""
    return host.translate(IDNA_DOTS).rstrip(".").lower()


def destination_of(url: str) -> str:
    """The host and port a URL's requests go to (the unit of concurrency and of the breaker)."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return url
    return f"{normalize_host(parts.hostname or '')}:{port}"


class DestinationHeld(Exception):
    """The destination's breaker is open, or no slot freed up in time.

    Attributes:
        destination: ``host:port``.
        reason: what a caller's error message says about it.
    """

    def __init__(self, destination: str, reason: str) -> None:
        super().__init__(f"{destination}: {reason}")
        self.destination = destination
        self.reason = reason


@dataclass(frozen=True)
class GateLimits:
    """How much one process sends to one destination, and when it stops trying."""

    per_destination: int = 4
    breaker_failures: int = 5
    breaker_seconds: float = 30.0


class DestinationGate:
    """In-flight counts and breakers of every destination one process calls.

    Args:
        limits: the cap and the breaker's thresholds.
        what: names the callers in log lines ("push", "MCP").
    """

    def __init__(self, limits: GateLimits, *, what: str) -> None:
        self.limits = limits
        self.what = what
        self._in_flight: dict[str, int] = defaultdict(int)
        self._failures: dict[str, int] = defaultdict(int)
        self._open_until: dict[str, float] = {}
        self._freed = asyncio.Condition()
        self._notifying: set[asyncio.Task[None]] = set()

    def in_flight(self, destination: str) -> int:
        """Calls to ``destination`` in flight now."""
        return self._in_flight.get(destination, 0)

    def has_room(self, destination: str, extra: int = 0) -> bool:
        """Whether one more call fits beside those in flight and ``extra`` about to start."""
        return self.in_flight(destination) + extra < self.limits.per_destination

    def take(self, destination: str) -> None:
        """Count a call as started (the caller checked ``has_room``)."""
        self._in_flight[destination] += 1

    def give(self, destination: str) -> None:
        """Count a call as finished, waking a caller waiting in ``slot``."""
        self._in_flight[destination] -= 1
        if self._in_flight[destination] <= 0:
            del self._in_flight[destination]
        with contextlib.suppress(RuntimeError):  # no running loop: nobody waits
            task = asyncio.get_running_loop().create_task(self._notify())
            # The loop keeps only weak references to tasks.
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)

    async def _notify(self) -> None:
        async with self._freed:
            self._freed.notify_all()

    def open_until(self, destination: str) -> float | None:
        """The monotonic time until which the breaker holds ``destination``; None if closed."""
        until = self._open_until.get(destination)
        if until is None or until <= time.monotonic():
            return None
        return until

    def record(self, destination: str, ok: bool) -> None:
        """One call's outcome: a success closes the breaker, too many failures open it."""
        if ok:
            self._failures.pop(destination, None)
            self._open_until.pop(destination, None)
            return
        self._failures[destination] += 1
        if self._failures[destination] >= self.limits.breaker_failures:
            self._failures[destination] = 0
            self._open_until[destination] = time.monotonic() + self.limits.breaker_seconds
            logger.warning(
                "%s destination %s failed %d times in a row; holding it %.0f s",
                self.what,
                destination,
                self.limits.breaker_failures,
                self.limits.breaker_seconds,
            )

    def _check_breaker(self, destination: str) -> None:
        until = self.open_until(destination)
        if until is not None:
            raise DestinationHeld(
                destination,
                f"failed {self.limits.breaker_failures} times in a row; held for "
                f"{until - time.monotonic():.0f} s more (circuit breaker)",
            )

    @contextlib.asynccontextmanager
    async def slot(self, destination: str, *, wait_seconds: float) -> AsyncIterator[Call]:
        """One call to ``destination``: waits for room, counts it while the body runs.

        The outcome feeds the breaker: the body sets ``Call.ok`` (True by default;
        None when the outcome says nothing about the destination, such as a
        refusal by the outbound policy); an exception out of the body is a
        failure, unless it is ``asyncio.CancelledError`` (the caller gave up).

        Raises:
            DestinationHeld: the breaker is open, or no slot freed within ``wait_seconds``.
        """
        self._check_breaker(destination)
        async with self._freed:
            try:
                async with asyncio.timeout(wait_seconds):
                    await self._freed.wait_for(lambda: self.has_room(destination))
            except TimeoutError:
                raise DestinationHeld(
                    destination,
                    f"{self.limits.per_destination} calls already in flight for "
                    f"{wait_seconds:.0f} s (per-destination limit)",
                ) from None
            self._check_breaker(destination)  # it may have opened while this call waited
            self.take(destination)  # under the lock: two woken waiters never both fit
        call = Call()
        try:
            yield call
        except asyncio.CancelledError:
            raise
        except BaseException:
            self.record(destination, ok=False)
            raise
        else:
            if call.ok is not None:
                self.record(destination, ok=call.ok)
        finally:
            self.give(destination)


@dataclass
class Call:
    """One call in a ``DestinationGate.slot``: the body sets ``ok`` to its outcome."""

    ok: bool | None = True
