"""Spindle's A2A agent card, served publicly at the well-known paths.

One card at ``/.well-known/agent-card.json`` (the A2A specification's path),
``/.well-known/agent-card`` (seed 003's) and ``/.well-known/agent.json`` (A2A up
to 0.2). Both JSON-RPC interfaces point at the gateway's ``POST /``
(``spindle.gateway.api.deps.base_url``: ``public_url`` when set, else the address the
client used), one for protocol 1.0 and one for 0.3. Push notifications are
offered (``capabilities.pushNotifications``: ``spindle.gateway.protocols.a2a.push_watch``).

Two shapes, chosen by the request's ``A2A-Version`` (header, or query parameter,
A2A 1.0 §3.6) and, when the request names none, by the path:

- ``1.0`` (or later): the card exactly as A2A 1.0 defines it (proto JSON of
  ``AgentCard``), nothing else: strict 1.0 validators refuse unknown members.
  Also what ``/.well-known/agent-card.json`` answers without a version: A2A
  1.0 §14.3 says the resource at that URI "MUST return an AgentCard object as
  defined in Section 4.4.1" (the card is read before any version is agreed, so
  §3.6.2's "empty value is 0.3" rule for requests does not pick its shape).
  A deployment whose clients are 0.3 (they send no version and need ``url``)
  sets ``SPINDLE_A2A_CARD_DEFAULT_VERSION=0.3``.
- ``0.3`` (or any ``0.x``): the same card plus the 0.3 members (``url``,
  ``protocolVersion``, ``preferredTransport``, ``additionalInterfaces``,
  ``security``, 0.3-style ``securitySchemes``), as the a2a-sdk's
  ``agent_card_to_dict`` writes it. Also what ``/.well-known/agent-card``
  (seed 003's path, whose example card has ``url``) and
  ``/.well-known/agent.json`` (the path of A2A up to 0.2, read only by old
  clients) answer without a version. A 0.3 client needs ``url``; a 1.0 client
  (the a2a-sdk's ``parse_agent_card``) reads ``supportedInterfaces`` and
  ignores the rest.

The response varies on ``A2A-Version`` (``Vary``), each shape with its own ETag.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from email.utils import formatdate
from typing import Annotated, Any

import orjson
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_1_0,
    TransportProtocol,
)
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf.json_format import MessageToDict

from spindle.gateway.api.deps import ArchiveDep, BaseUrlDep, OptionalIdentityDep, SettingsDep
from spindle.shared.contracts.graph_spec import GraphSpec

CARD_PATHS = (AGENT_CARD_WELL_KNOWN_PATH, "/.well-known/agent-card", "/.well-known/agent.json")
AGENT_VERSION = "0.1.0"

router = APIRouter(tags=["a2a"])

RUN_GRAPH = AgentSkill(
    id="run-graph",
    name="Run an agent graph",
    description=(
        "Runs a registered Spindle graph durably: the message text (or data part) is the "
        "run's input, message metadata 'graph' names the graph (default: the gateway's "
        "SPINDLE_A2A_DEFAULT_GRAPH, research-agent unless set; 'clarify' asks one question). "
        "A run waiting for a person shows as input-required; answer with a message on the "
        "same task. Fetch this card with your credentials to see every graph your tenant "
        "can run as a skill of its own."
    ),
    tags=["graph", "agent", "workflow", "durable"],
    examples=["What is the boiling point of water at sea level?"],
)
TASKS_EXECUTE = AgentSkill(
    id="tasks.execute",
    name="Execute Task Tree",
    description="Execute a complete task tree with multiple tasks (JSON-RPC tasks.* methods)",
    tags=["task", "orchestration", "workflow", "execution"],
)
SKILLS = (RUN_GRAPH, TASKS_EXECUTE)
"""The skills every card lists; each registered graph of the caller's tenant adds one."""


def graph_skill(spec: GraphSpec) -> AgentSkill:
    """One registered graph as a skill: message metadata ``graph`` = ``spec.name``."""
    return AgentSkill(
        id=spec.name,
        name=spec.name,
        description=(spec.description or f"Runs graph {spec.name}")
        + f" (message metadata 'graph': '{spec.name}')",
        tags=["graph"],
    )


def build_card(base_url: str, graphs: Sequence[GraphSpec] = ()) -> AgentCard:
    """The card for a gateway reached at ``base_url``, listing ``graphs`` as skills."""
    rpc_url = f"{base_url.rstrip('/')}/"
    return AgentCard(
        name="Spindle",
        description=(
            "Durable AI agent graph runs on Temporal, streamed live: send a message to run a "
            "graph, follow it, answer its questions."
        ),
        version=AGENT_VERSION,
        supported_interfaces=[
            AgentInterface(
                url=rpc_url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            AgentInterface(
                url=rpc_url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
        ],
        provider=AgentProvider(organization="Spindle", url=base_url.rstrip("/")),
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[*SKILLS, *(graph_skill(spec) for spec in graphs)],
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer", description="an API key (spk_…) or a JWT"
                )
            ),
            "apiKey": SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(location="header", name="X-API-Key")
            ),
        },
        security_requirements=[
            SecurityRequirement(schemes={"bearer": StringList()}),
            SecurityRequirement(schemes={"apiKey": StringList()}),
        ],
    )


# Paths whose card is the 0.3-compatible one when the request names no version.
LEGACY_CARD_PATHS = frozenset({"/.well-known/agent-card", "/.well-known/agent.json"})


def wants_v1(
    version: str | None, path: str = AGENT_CARD_WELL_KNOWN_PATH, default: str = "1.0"
) -> bool:
    """Whether the card asked for with ``A2A-Version`` ``version`` at ``path`` is the
    pure 1.0 one: 1.0 or later asks for it, ``0.x`` for the 0.3 shape, and no
    version takes the path's default (``default`` at the spec's path: the setting
    ``a2a_card_default_version``; the 0.3 shape at the older paths)."""
    value = (version or "").strip()
    if not value:
        return default == "1.0" and not path.endswith(tuple(LEGACY_CARD_PATHS))
    major, _, _ = value.partition(".")
    return major.isdigit() and int(major) >= 1


def card_json(
    base_url: str,
    version: str | None = None,
    graphs: Sequence[GraphSpec] = (),
    path: str = AGENT_CARD_WELL_KNOWN_PATH,
    default: str = "1.0",
) -> dict[str, Any]:
    """The card as a client of protocol ``version`` reads it at ``path`` (module docs)."""
    card = build_card(base_url, graphs)
    if wants_v1(version, path, default):
        return dict(MessageToDict(card))
    return agent_card_to_dict(card)


# A2A §8.6 asks card servers for HTTP caching: the anonymous card changes only
# with a release or the public URL, so clients may keep it for an hour and
# revalidate with If-None-Match (the ETag is a hash of the exact bytes served).
CACHE_CONTROL = "public, max-age=3600"
# A card fetched with credentials lists the caller's tenant's graphs, which change
# when one is registered: kept by that client only, briefly.
CALLER_CACHE_CONTROL = "private, max-age=60"
# The anonymous card is built from code and settings fixed for the process's life.
LAST_MODIFIED = formatdate(time.time(), usegmt=True)


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag in tags


async def get_agent_card(
    request: Request,
    settings: SettingsDep,
    base_url: BaseUrlDep,
    identity: OptionalIdentityDep,
    archive: ArchiveDep,
    *,
    if_none_match: Annotated[str | None, Header()] = None,
    a2a_version_header: Annotated[
        str | None,
        Header(
            alias="A2A-Version",
            description="1.0: the pure A2A 1.0 card; 0.3: with the 0.3 fields; none: "
            "1.0 at /.well-known/agent-card.json, 0.3 at the two older paths",
        ),
    ] = None,
    a2a_version_query: Annotated[
        str | None, Query(alias="A2A-Version", description="the header's value, as a parameter")
    ] = None,
) -> Response:
    """Spindle's A2A agent card (public, no credentials needed); 304 when the
    client's ``If-None-Match`` holds the current ETag of the shape it asks for.

    With credentials (or with authentication off) the card also lists, as skills,
    every graph the caller's tenant has registered (docs/protocols/a2a.md).
    """
    graphs: list[GraphSpec] = []
    if identity is not None:
        graphs = await archive.list_graphs(tenant_id=identity.tenant_id)
    version = a2a_version_header or a2a_version_query
    body = orjson.dumps(
        card_json(base_url, version, graphs, request.url.path, settings.a2a_card_default_version)
    )
    etag = _etag(body)
    headers = {
        "ETag": etag,
        "Cache-Control": CACHE_CONTROL if identity is None else CALLER_CACHE_CONTROL,
        "Last-Modified": LAST_MODIFIED,
        "Vary": "A2A-Version, Authorization, X-API-Key",
    }
    if _matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


for _path in CARD_PATHS:
    router.add_api_route(
        _path,
        get_agent_card,
        methods=["GET"],
        summary="The A2A agent card",
        response_class=JSONResponse,
        responses={304: {"description": "the card has not changed (If-None-Match)"}},
    )
