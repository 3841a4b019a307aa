"""Protocols over Spindle runs: JSON-RPC 2.0 ``tasks.*`` (seed 003) and A2A."""
