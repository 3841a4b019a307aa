"""Serving a run's messages: the gzip history and the live SSE stream."""
