"""``EdgeEnvelopes``: the NodeMessage each taken edge carries to the node it enters.

When a node finishes, every edge it takes carries a NodeMessage (seed 000):
``from`` the node, ``fromPort`` its port, ``to`` and ``toPort`` from the edge,
``trace`` the path so far (the last ``TRACE_STEPS_KEPT`` steps, ``traceCount``
all of them) and ``meta`` with the sender's type and role, the run's
``startTime`` and ``lastNode``. The envelope waits for its node; when the node
starts it takes every envelope that arrived (``activated``) and its execution
carries them, payloads by state key (``inbound``): the sender's output is in the
run state already, so history per node stays constant (docs/graphs/envelopes.md).

Workflow code: deterministic, no I/O (ids are uuid5 of the run, node, visit, edge).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.envelope import (
        RUN_INPUT_SENDER,
        CarriedEnvelopes,
        NodeMessage,
        NodeMessageMeta,
        TraceStep,
        traced,
    )
    from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec
    from spindle.worker.contracts import RunRef
    from spindle.worker.contracts.envelope import InboundEnvelope
    from spindle.worker.contracts.envelope import role_of as _role
    from spindle.worker.registry import spec_of


def role_of(node_type: str) -> str:
    """The sender's role in its envelopes: agent, user (prompts) or system."""
    spec = spec_of(node_type)
    return _role(spec.runs if spec is not None else None)


class EdgeEnvelopes:
    """The envelopes between a run's nodes (see the module docstring).

    Args:
        graph: the run's graph.
        run: the run (its ids make the message ids).
        start_time: ISO 8601 start of the run (``meta.startTime``).
    """

    def __init__(self, graph: GraphSpec, run: RunRef, start_time: str) -> None:
        self._graph = graph
        self._run = run
        self.start_time = start_time
        self.last_node: str | None = None
        self._waiting: dict[str, list[NodeMessage]] = {}
        self._taken: dict[str, list[NodeMessage]] = {}

    # -- continue-as-new ------------------------------------------------------

    def restore(self, carried: CarriedEnvelopes) -> None:
        self.start_time, self.last_node = carried.start_time, carried.last_node
        self._waiting = {k: list(v) for k, v in carried.waiting.items()}
        self._taken = {k: list(v) for k, v in carried.taken.items()}

    def carried(self) -> CarriedEnvelopes:
        return CarriedEnvelopes(
            start_time=self.start_time,
            last_node=self.last_node,
            waiting=self._waiting,
            taken=self._taken,
        )

    # -- the flow -------------------------------------------------------------

    def start(self, now: datetime) -> None:
        """The entry node's envelope: the run input, sent by its trigger."""
        entry = self._graph.entry
        self._waiting[entry] = [
            NodeMessage(
                messageId=self._message_id(RUN_INPUT_SENDER, 1, "start"),
                **{"from": RUN_INPUT_SENDER},
                to=entry,
                timestamp=now.isoformat(),
                trace=[
                    TraceStep.model_validate({"nodeId": RUN_INPUT_SENDER, "time": now.isoformat()})
                ],
                traceCount=1,
                meta=self._meta(RUN_INPUT_SENDER, None, "user"),
            )
        ]

    def activated(self, node_id: str) -> None:
        """The node starts: it takes the envelopes that wait for it (a node resumed
        after continue-as-new keeps those it took)."""
        waiting = self._waiting.pop(node_id, None)
        if waiting is not None or node_id not in self._taken:
            self._taken[node_id] = waiting or []

    def skipped(self, node_id: str) -> None:
        """The node will not run in this pass: what waited for it is dropped."""
        self._waiting.pop(node_id, None)

    def finished(self, node_id: str) -> None:
        """The node failed or stopped: it sends nothing."""
        self._taken.pop(node_id, None)

    def delivered(
        self, node: NodeSpec, visit: int, ports: list[str], taken: list[int], now: datetime
    ) -> None:
        """The node succeeded: an envelope on each edge it took (``taken``: indexes)."""
        self.last_node = node.id
        arrived = self._taken.pop(node.id, [])
        port = ports[0] if ports else None
        primary = arrived[-1] if arrived else None
        step = TraceStep.model_validate({"nodeId": node.id, "port": port, "time": now.isoformat()})
        trace, count = traced(
            primary.trace if primary else [], (primary.trace_count or 0) if primary else 0, step
        )
        meta = self._meta(node.id, node.type, role_of(node.type))
        for index in taken:
            edge = self._graph.edges[index]
            message = NodeMessage(
                messageId=self._message_id(node.id, visit, str(index)),
                **{"from": node.id},
                to=edge.to,
                fromPort=edge.from_port or port,
                toPort=edge.to_port,
                timestamp=now.isoformat(),
                trace=trace,
                traceCount=count,
                meta=meta,
            )
            self._waiting.setdefault(edge.to, []).append(message)

    def inbound(self, node_id: str, state: dict[str, object]) -> list[InboundEnvelope]:
        """The envelopes the node's execution carries: payloads by state key (the
        sender's output; ``_previous`` when it finished last, the run input for the
        entry's). The node's projection must include each ``payload_key``."""
        out = []
        for message in self._taken.get(node_id, []):
            sender = message.from_
            key = "_previous" if sender == self.last_node and "_previous" in state else sender
            out.append(
                InboundEnvelope(
                    message=message.model_copy(
                        update={
                            "meta": message.meta.model_copy(update={"last_node": self.last_node})
                        }
                    ),
                    payload_key=key,
                )
            )
        return out

    # -- helpers --------------------------------------------------------------

    def _meta(self, sender: str, node_type: str | None, role: str) -> NodeMessageMeta:
        return NodeMessageMeta.model_validate(
            {
                "stepId": sender,
                "status": "done",
                "nodeType": node_type,
                "role": role,
                "startTime": self.start_time,
                "lastNode": sender if node_type is not None else self.last_node,
            }
        )

    def _message_id(self, sender: str, visit: int, edge: str) -> str:
        run = self._run
        name = f"{run.workflow_id}:{run.run_id}:{sender}:{visit}:edge:{edge}"
        return str(uuid.uuid5(uuid.NAMESPACE_URL, name))
