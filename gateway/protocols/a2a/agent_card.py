"""Spindle's A2A agent card, served publicly at the well-known paths.

One card at ``/.well-known/agent-card.json`` (the A2A specification's path),
``/.well-known/agent-card`` (seed 003's) and ``/.well-known/agent.json`` (A2A up
to 0.2). Both JSON-RPC interfaces point at the gateway's ``POST /``
(``spindle.gateway.api.deps.base_url``: ``public_url`` when set, else the address the
client used), one for protocol 1.0 and one for 0.3. Push notifications are
offered (``capabilities.pushNotifications``: ``spindle.gateway.protocols.a2a.push_watch``).

Two shapes, chosen by the request's ``A2A-Version`` (header, or query parameter,
A2A 1.0 §3.6):

- ``1.0`` (or later): the card exactly as A2A 1.0 defines it (proto JSON of
  ``AgentCard``), nothing else: strict 1.0 validators refuse unknown members.
- ``0.3`` or none (§3.6.2: "Agents MUST interpret empty value as 0.3"): the same
  card plus the 0.3 members (``url``, ``protocolVersion``, ``preferredTransport``,
  ``additionalInterfaces``, ``security``, 0.3-style ``securitySchemes``), as the
  a2a-sdk's ``agent_card_to_dict`` writes it. A 0.3 client needs ``url``; a 1.0
  client (the a2a-sdk's ``parse_agent_card``) reads ``supportedInterfaces`` and
  ignores the rest.

The response varies on ``A2A-Version`` (``Vary``), each shape with its own ETag.
"""

from __future__ import annotations

import hashlib
import time
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
from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, Response
from google.protobuf.json_format import MessageToDict

from spindle.gateway.api.deps import BaseUrlDep

CARD_PATHS = (AGENT_CARD_WELL_KNOWN_PATH, "/.well-known/agent-card", "/.well-known/agent.json")
AGENT_VERSION = "0.1.0"

router = APIRouter(tags=["a2a"])

SKILLS = (
    AgentSkill(
        id="run-graph",
        name="Run an agent graph",
        description=(
            "Runs a registered Spindle graph durably: the message text (or data part) is the "
            "run's input, message metadata 'graph' names the graph (default research-agent). "
            "A run waiting for a person shows as input-required; answer with a message on the "
            "same task."
        ),
        tags=["graph", "agent", "workflow", "durable"],
        examples=["What is the boiling point of water at sea level?"],
    ),
    AgentSkill(
        id="research-agent",
        name="Research a question",
        description="An agent answers a question with knowledge-base search and a calculator.",
        tags=["research", "question-answering"],
        examples=["How many days are there in 3 weeks?"],
    ),
    AgentSkill(
        id="approval-flow",
        name="Draft and approve a document",
        description=(
            "Drafts a document on a topic and waits for a person to approve or reject it "
            "(input-required)."
        ),
        tags=["approval", "human-in-the-loop"],
        examples=["Q3 budget"],
    ),
    AgentSkill(
        id="tasks.execute",
        name="Execute Task Tree",
        description="Execute a complete task tree with multiple tasks (JSON-RPC tasks.* methods)",
        tags=["task", "orchestration", "workflow", "execution"],
    ),
)


def build_card(base_url: str) -> AgentCard:
    """The card for a gateway reached at ``base_url``."""
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
        skills=list(SKILLS),
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


def wants_v1(version: str | None) -> bool:
    """Whether an ``A2A-Version`` value asks for 1.0 or later (empty means 0.3)."""
    major, _, _ = (version or "").strip().partition(".")
    return major.isdigit() and int(major) >= 1


def card_json(base_url: str, version: str | None = None) -> dict[str, Any]:
    """The card as a client of protocol ``version`` reads it (see the module docs)."""
    card = build_card(base_url)
    if wants_v1(version):
        return dict(MessageToDict(card))
    return agent_card_to_dict(card)


# A2A §8.6 asks card servers for HTTP caching: the card changes only with a
# release or the public URL, so clients may keep it for an hour and revalidate
# with If-None-Match (the ETag is a hash of the exact bytes served).
CACHE_CONTROL = "public, max-age=3600"
# The card is built from code and settings fixed for the process's life.
LAST_MODIFIED = formatdate(time.time(), usegmt=True)


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag in tags


async def get_agent_card(
    base_url: BaseUrlDep,
    if_none_match: Annotated[str | None, Header()] = None,
    a2a_version_header: Annotated[
        str | None,
        Header(
            alias="A2A-Version",
            description="1.0: the pure A2A 1.0 card; none or 0.3: with 0.3 fields",
        ),
    ] = None,
    a2a_version_query: Annotated[
        str | None, Query(alias="A2A-Version", description="the header's value, as a parameter")
    ] = None,
) -> Response:
    """Spindle's A2A agent card (public, no credentials needed); 304 when the
    client's ``If-None-Match`` holds the current ETag of the shape it asks for."""
    body = orjson.dumps(card_json(base_url, a2a_version_header or a2a_version_query))
    etag = _etag(body)
    headers = {
        "ETag": etag,
        "Cache-Control": CACHE_CONTROL,
        "Last-Modified": LAST_MODIFIED,
        "Vary": "A2A-Version",
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
