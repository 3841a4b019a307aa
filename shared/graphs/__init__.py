"""Graphs as logic: parsing, structure checks, expressions, node parameters, validation.

Pure and deterministic (no I/O): the workflow sandbox passes this package through."""
