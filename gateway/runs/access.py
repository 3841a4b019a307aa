"""Who may read or control a run: the tenant check every per-run route makes.

A run's owner (tenant and user) is recorded in three places when it starts: the
stream's Redis metadata (cheapest, read first), its Mongo document and its
Temporal search attributes and memo. A run of another tenant is reported
exactly as an unknown run (``NotFound``) so ids never leak across tenants, and
costs the same lookups (every home is asked, as for an unknown id), so the
answer's timing does not tell them apart either; a caller of the right tenant
who may read but not control a run gets ``Forbidden``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from temporalio.client import Client

from spindle.gateway.runs.lookup import archived_run, not_found
from spindle.gateway.runs.temporal import TENANT_KEY, describe_workflow
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import Forbidden
from spindle.shared.contracts.identity import Identity
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive

log = logging.getLogger(__name__)


class RunAction(StrEnum):
    """What a caller wants to do with a run."""

    READ = "read"  # describe, history, stream, files
    CONTROL = "control"  # answer a prompt, steer, upload, cancel, terminate


@dataclass(frozen=True)
class RunOwner:
    """The tenant and user a run belongs to."""

    workflow_id: str
    tenant_id: str
    user_id: str | None


async def find_run_owner(
    workflow_id: str,
    *,
    bus: MessageBus,
    archive: RunArchive,
    temporal: Client,
    tenant_id: str | None = None,
) -> RunOwner | None:
    """The run's owner from the first of its homes that knows it; None if unknown.

    With ``tenant_id``, a home that names another tenant counts as not knowing
    the run: the next home is asked, and another tenant's run ends as None
    after the same three lookups as an unknown id.

    Raises:
        Unavailable: Temporal is down and neither Redis nor Mongo knew the run.
    """
    try:
        meta = await bus.get_meta(workflow_id)
    except Exception as exc:  # Redis down: the other homes still answer
        log.warning("stream metadata of %s unavailable: %s", workflow_id, exc)
        meta = {}
    if meta.get("tenant_id") and tenant_id in (None, meta["tenant_id"]):
        return RunOwner(workflow_id, meta["tenant_id"], meta.get("user_id") or None)
    record = await archived_run(archive, workflow_id)
    if record is not None and tenant_id in (None, record.tenant_id):
        return RunOwner(workflow_id, record.tenant_id, record.user_id)
    description = await describe_workflow(temporal, workflow_id)
    if description is None:
        return None
    tenant = description.typed_search_attributes.get(TENANT_KEY)
    if tenant is None or tenant_id not in (None, tenant):
        return None  # not a Spindle run (nobody's), or not the caller's
    memo = await description.memo()
    user = memo.get("user")
    return RunOwner(workflow_id, tenant, user if isinstance(user, str) else None)


def check_run_access(
    owner: RunOwner | None,
    identity: Identity,
    action: RunAction,
    settings: Settings,
    workflow_id: str,
) -> RunOwner:
    """Allow or refuse ``identity`` doing ``action`` on the run ``owner`` describes.

    Raises:
        NotFound: unknown run, another tenant's run, or a stream token of another run.
        Forbidden: the caller sees the run but may not control it.
    """
    if owner is None or owner.tenant_id != identity.tenant_id:
        raise not_found(workflow_id)
    if identity.run_scope is not None and identity.run_scope != workflow_id:
        raise not_found(workflow_id)
    if action is RunAction.CONTROL:
        if identity.method == "stream_token":
            raise Forbidden("a stream token may only read its run's messages")
        is_owner = owner.user_id is None or owner.user_id == identity.user_id
        allowed = is_owner or identity.method == "disabled"
        if not (allowed or identity.has_any_role(settings.run_control_roles)):
            raise Forbidden(
                f"only the run's owner or a user with role "
                f"{' or '.join(settings.run_control_roles)} may control run '{workflow_id}'"
            )
    return owner


async def authorize_run(
    workflow_id: str,
    identity: Identity,
    action: RunAction,
    *,
    bus: MessageBus,
    archive: RunArchive,
    temporal: Client,
    settings: Settings,
) -> RunOwner:
    """Find the run and check ``identity`` may do ``action`` on it (see ``check_run_access``)."""
    owner = await find_run_owner(
        workflow_id, bus=bus, archive=archive, temporal=temporal, tenant_id=identity.tenant_id
    )
    return check_run_access(owner, identity, action, settings, workflow_id)
