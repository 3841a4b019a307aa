"""What each ``spindle`` command talks to, as its ``--help`` says it.

Most commands that read or act on runs go through the gateway with the client
SDK (``--url``/``SPINDLE_URL`` and credentials). The others reach a server the
gateway does not front for them (Temporal's history of a given execution,
API keys, retention, the graph registry across tenants); their help names that
server and the variable that locates it, so an operator knows what the command
needs before running it.
"""

from __future__ import annotations

THROUGH_GATEWAY = (
    "Goes through the gateway with the client SDK "
    "(--url/SPINDLE_URL and --api-key/SPINDLE_API_KEY or --token/SPINDLE_TOKEN)."
)
TEMPORAL_DIRECT = (
    "Talks to Temporal directly (SPINDLE_TEMPORAL_ADDRESS, SPINDLE_TEMPORAL_NAMESPACE), "
    "not through the gateway."
)
MONGO_DIRECT = (
    "Talks to MongoDB directly (SPINDLE_MONGO_URL, SPINDLE_MONGO_DB), not through the gateway."
)
# Admin commands (spindle.cli.gateway_admin): the gateway by default, MongoDB to bootstrap.
GATEWAY_OR_MONGO = (
    "Goes through the gateway when one is known (--url/SPINDLE_URL, or a running spindle "
    "dev stack; --api-key/SPINDLE_API_KEY or --token/SPINDLE_TOKEN); with --direct, or no "
    "gateway known, talks to MongoDB directly (SPINDLE_MONGO_URL, SPINDLE_MONGO_DB)."
)
# Payloads above SPINDLE_PAYLOAD_OFFLOAD_BYTES live in MongoDB, not in the history.
OFFLOADED_PAYLOADS = (
    "Large payloads the worker offloaded are read from MongoDB (SPINDLE_MONGO_URL, "
    "SPINDLE_MONGO_DB)."
)
SERVERS_DIRECT = (
    "Talks to Temporal, Redis and MongoDB directly "
    "(SPINDLE_TEMPORAL_ADDRESS, SPINDLE_REDIS_URL, SPINDLE_MONGO_URL)."
)


def described(what: str, *reaches: str) -> str:
    """A command's ``--help`` description: what it does, then what it talks to."""
    return " ".join((what, *reaches))
