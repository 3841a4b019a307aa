"""The gateway's service layer: what every door (REST, JSON-RPC, A2A, AG-UI, MCP,
schedules) does to a run, written once.

``GatewayState`` is the app's one typed state; ``Caller`` is who asks, with that
state; ``run_starts``, ``run_input``, ``run_control`` and ``run_views`` start,
answer, cancel or terminate, and describe a run for a caller; ``run_streams``
follows one (the caller's stream slot, the run's messages, the closed-run
check) and ``run_records`` reads what Temporal recorded of it (start input,
histories, workstreams). The run-start permit, the idempotency key, the webhook
registration and the conversation policy are applied in ``run_starts`` and
nowhere else; a stream slot is taken in ``run_streams`` and nowhere else.
"""
