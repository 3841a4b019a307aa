"""The worker's own telemetry endpoints: ``metrics_server`` serves ``GET /metrics`` and
the Temporal SDK's metrics on the next port."""
