"""HTTP plumbing of the gateway: problem bodies, body limits, access log, the server."""
