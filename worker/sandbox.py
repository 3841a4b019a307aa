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

- ``install_exec_cache``: the sandbox runs each activation, and each payload's
  serialization context, by ``exec`` of a short source string, which Python
  compiles anew each time (about 12 µs; several a node). The strings are the
  SDK's own constants; their code is compiled once per process.

A code object is immutable; each run still executes it into a module (or the
sandbox's globals) of its own, so runs share no state through either cache.
"""

from __future__ import annotations

import builtins
import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Mapping, Sequence
from types import CodeType, ModuleType
from typing import Any

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox import _runner as sandbox_runner

# Modules the sandbox shares with the worker instead of re-importing per run:
# ours are deterministic models and policies; the rest are pure third-party libraries.
PASSTHROUGH_MODULES = (
    "spindle.shared.contracts",
    "spindle.shared.graphs",
    "spindle.worker.contracts.policies",
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
    """The sandbox (on), with our deterministic modules passed through, and the
    code of the modules it re-imports and of its own source strings compiled
    once (``install_code_cache``, ``install_exec_cache``)."""
    install_code_cache()
    install_exec_cache()
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


# Sources the sandbox runs: a handful of constant strings per workflow class.
@functools.lru_cache(maxsize=256)
def _compiled(source: str) -> CodeType:
    return compile(source, "<string>", "exec")


def exec_compiled_once(
    source: str | CodeType,
    globals: dict[str, Any] | None = None,
    locals: Mapping[str, object] | None = None,
    /,
) -> None:
    """``exec``, with a source string's code compiled once per process."""
    code = _compiled(source) if isinstance(source, str) else source
    builtins.exec(code, globals, locals)


def install_exec_cache() -> None:
    """Make the sandbox runner's ``exec`` ``exec_compiled_once`` (idempotent).

    A module global named ``exec`` in the runner's module is found before the
    builtin; the SDK's code is unchanged, and executes the same code objects.
    """
    setattr(sandbox_runner, "exec", exec_compiled_once)  # noqa: B010 - a module global
