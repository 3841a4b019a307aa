"""Spindle: durable AI agent graph runs on Temporal, streamed live."""
