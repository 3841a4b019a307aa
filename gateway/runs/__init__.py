"""Runs as the gateway sees them: starting, finding, describing, updating, access checks."""
