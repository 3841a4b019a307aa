"""Built-in node types run by ``execute_node``: ``tool``, ``router``, ``output``,
``filter``, ``merge``.

Importing this package registers them (see ``spindle.worker.registry``); their specs
are ``spindle.shared.graphs.node_types``'s.
"""

from spindle.worker.nodes import filter_merge, output, router, tool

__all__ = ["filter_merge", "output", "router", "tool"]
