"""Posting a run's messages to its stream from inside an activity or a node.

- ``poster``: ``MessagePoster``, idempotent and fenced posts of one activity execution;
- ``chunk_poster``: ``ChunkPoster``, an LLM turn's token chunks as stream messages.
"""
