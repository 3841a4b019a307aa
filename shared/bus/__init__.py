"""The Redis message bus: a capped list plus a channel per run, and the per-process hub."""
