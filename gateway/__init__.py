"""The FastAPI gateway, imported as ``spindle.gateway``: REST, SSE, JSON-RPC and A2A."""
