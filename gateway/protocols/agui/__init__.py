"""AG-UI 1.0 over Spindle runs: ``POST /agui/{graph}`` answers a ``RunAgentInput`` with
an SSE stream of AG-UI events derived from the run's message stream.

The mapping (docs/protocols/agui.md): ``event_mapper`` turns the run's
messages into AG-UI events, ``threads`` keeps which Spindle run a thread and an
AG-UI run stand for, ``run_stream`` starts, resumes or re-attaches and streams.
"""
