"""The Temporal worker, imported as ``spindle.worker``.

The root holds the entry point (``main``), the node-type registry (``registry``) and
the workflow sandbox (``sandbox``); each part is a sub-package. ``workflows``
(deterministic) and ``activities`` (all I/O) never import each other: what both
need is in ``contracts``. The activities run ``nodes``, ``tools`` and ``llm``
providers, post through ``posting`` and archive through ``archive``; ``offerings``
is what the worker offers, ``replay`` replays histories, ``telemetry`` serves its
metrics and ``examples`` holds the example graphs.
"""
