"""The workflow sandbox the worker (and the replayer) runs workflows in.

Temporal's sandbox imports a workflow's module afresh for every workflow run it
starts (docs/operations/scaling.md, "Workflow sandbox"): modules it does not pass
through from the worker are found, compiled and executed once per run. Two things
keep that cheap:

- ``PASSTHROUGH_MODULES``: deterministic modules the sandbox shares with the worker;
- ``install_code_cache``: the code objects of our re-imported modules, compiled once
  per worker process. Without it, a process with no usable bytecode cache (the
  ``PYTHONDONTWRITEBYTECODE=1`` of many images and CI machines, or a read-only
  install) compiled ``graph_run.py`` from source for every run: about 7 ms of a
  3-node run's 39 ms of worker CPU (docs/benchmarks.md).

A code object is immutable; each run still executes it into a module of its own,
so runs share no state through the cache.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

# Modules the sandbox shares with the worker instead of re-importing per run:
# ours are deterministic models and policies; the rest are pure third-party libraries.
PASSTHROUGH_MODULES = (
    "spindle.shared.contracts",
    "spindle.shared.graphs",
    "spindle.worker.policies",
    "pydantic",
    "pydantic_core",
    "jmespath",
    "jsonschema",
    "referencing",
    "rpds",
    "jsonschema_specifications",
    "orjson",
    "yaml",
    # Tracing state (current span, context vars) must be the worker's, not a copy.
    "opentelemetry",
)

# The packages whose code the cache keeps: the workflow modules the sandbox re-imports.
CACHED_PACKAGES = ("spindle",)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox (on), with our deterministic modules passed through and the
    code of the modules it re-imports compiled once (``install_code_cache``)."""
    install_code_cache()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )


class _CachingSourceLoader(importlib.machinery.SourceFileLoader):
    """A source loader that compiles a file once per process and source version."""

    # Two threads compiling one file at once both store equal code: no lock needed.
    _codes: dict[tuple[str, int, int], CodeType] = {}

    def get_code(self, fullname: str) -> CodeType:
        stat = os.stat(self.path)
        key = (self.path, stat.st_mtime_ns, stat.st_size)
        code = self._codes.get(key)
        if code is None:
            code = super().get_code(fullname)
            if code is None:  # pragma: no cover - a source file always has code
                raise ImportError(f"no code for {fullname}", name=fullname)
            self._codes[key] = code
        return code


class SandboxCodeCache(importlib.abc.MetaPathFinder):
    """Finds ``packages``' source modules as the path finder does, with a loader
    that keeps their compiled code (see the module docstring).

    Args:
        packages: top-level package names whose modules are cached.
    """

    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = tuple(packages)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in self.packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = spec.loader if spec is not None else None
        if spec is None or type(loader) is not importlib.machinery.SourceFileLoader:
            return spec
        spec.loader = _CachingSourceLoader(loader.name, loader.path)
        return spec


def install_code_cache(packages: Sequence[str] = CACHED_PACKAGES) -> SandboxCodeCache:
    """Put a ``SandboxCodeCache`` first on ``sys.meta_path`` (once per process)."""
    for finder in sys.meta_path:
        if isinstance(finder, SandboxCodeCache):
            return finder
    finder = SandboxCodeCache(packages)
    sys.meta_path.insert(0, finder)
    return finder
