"""``a2a-tck``: the A2A TCK's agent as a graph (``a2a-tck.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph

# The TCK's scenario prefixes of the A2A message id, each to its port.
_SCENARIOS = (
    ("tck-input-required", "ask"),
    ("tck-artifact-text", "text"),
    ("tck-artifact-file-url", "file_url"),
    ("tck-artifact-file", "file"),
    ("tck-artifact-data", "data"),
    ("tck-message-response", "message"),
)


def graph() -> Graph:
    """The ``a2a-tck`` example graph."""
    g = Graph(
        "a2a-tck",
        description="The A2A TCK's agent as a graph: it routes on the A2A message's id "
        "(meta.a2a.messageId, the TCK's scenario prefixes) to a question (input-required "
        "until a follow-up message on the same task), an artifact of each part kind, a "
        "Message reply, or a plain completion. Make it the default A2A graph "
        "(SPINDLE_A2A_DEFAULT_GRAPH=a2a-tck) to run the stock TCK (docs/protocols/a2a.md).",
    )
    scenario = g.router(
        "scenario",
        [
            (f"starts_with(meta.a2a.messageId || '', '{prefix}')", port)
            for prefix, port in _SCENARIOS
        ],
        default="complete",
        label="The TCK scenario of the message id",
    )
    ask = g.prompt(
        "ask",
        label="Wait for the follow-up",
        prompt="Waiting for your follow-up message on this task.",
    )
    answered = g.output(
        "answered", select="{answer: ask.ask_response}", message="Completed after the follow-up"
    )
    text = g.output(
        "text",
        select="{artifacts: [{artifactId: 'text', parts: [{text: 'Generated text content'}]}]}",
    )
    file = g.output(
        "file",
        select="{artifacts: [{artifactId: 'file', parts: [{raw: 'RmlsZSBjb250ZW50', "
        "filename: 'output.txt', mediaType: 'text/plain'}]}]}",
    )
    file_url = g.output(
        "file_url",
        select="{artifacts: [{artifactId: 'file-url', parts: [{url: "
        "'https://example.com/output.txt', filename: 'output.txt', mediaType: 'text/plain'}]}]}",
    )
    data = g.output(
        "data",
        select="{artifacts: [{artifactId: 'data', parts: [{data: {key: 'value', count: `42`}}]}]}",
    )
    message = g.output("message", select="{parts: [{text: 'Direct message response'}]}")
    complete = g.output("complete", select="'Hello from TCK'", message="Hello from TCK")
    g.edge(scenario, ask, from_port="ask")
    ask >> answered
    for node, port in (
        (text, "text"),
        (file, "file"),
        (file_url, "file_url"),
        (data, "data"),
        (message, "message"),
        (complete, "complete"),
    ):
        g.edge(scenario, node, from_port=port)
    return g
