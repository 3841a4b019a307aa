"""Replaying recorded run histories against the current workflow code.

- ``histories``: history files and run bundles, read and written; histories
  fetched from Temporal, and recorded by running a graph;
- ``replayer``: the replayer configured as the worker is, and
  ``python -m spindle.worker.replay FILE...`` (``__main__``).
"""
