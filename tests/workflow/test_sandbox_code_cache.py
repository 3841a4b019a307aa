"""The sandbox executes the workflow module afresh for every run, but the worker
compiles it once (spindle/worker/sandbox.py): without the cache, a process with no
usable bytecode (``PYTHONDONTWRITEBYTECODE=1``) compiled ``graph_run.py`` per run.
Likewise the sandbox's own source strings, which it ``exec``s per activation.
"""

from __future__ import annotations

import builtins
import importlib._bootstrap_external as bootstrap_external
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import pytest

from spindle.shared.contracts.runs import RunStatus
from spindle.shared.graphs.structure import parse_graph
from spindle.worker import sandbox
from spindle.worker.workflows import graph_run
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

RUNS = 4


def one_tool_graph() -> Any:
    return parse_graph(
        {
            "name": "code-cache",
            "entry": "words",
            "nodes": [
                {
                    "id": "words",
                    "type": "tool",
                    "params": {"tool": "word_count", "args": {"text": "a b c"}},
                }
            ],
            "edges": [],
        }
    )


async def test_each_run_executes_the_workflow_module_but_it_is_compiled_once(
    runner: GraphRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = str(Path(graph_run.__file__).resolve())
    loaded: list[str] = []  # code loads (compile or bytecode read) of graph_run.py
    executed: list[str] = []  # executions of a module's code, by module name

    real_get_code = bootstrap_external.SourceLoader.get_code
    real_exec_module = bootstrap_external._LoaderBasics.exec_module

    def get_code(self: Any, fullname: str) -> CodeType | None:
        if str(Path(self.get_filename(fullname)).resolve()) == source:
            loaded.append(fullname)
        return real_get_code(self, fullname)

    def exec_module(self: Any, module: ModuleType) -> None:
        executed.append(module.__name__)
        real_exec_module(self, module)

    monkeypatch.setattr(bootstrap_external.SourceLoader, "get_code", get_code)
    monkeypatch.setattr(bootstrap_external._LoaderBasics, "exec_module", exec_module)

    for _ in range(RUNS):
        handle = await runner.start(one_tool_graph())
        assert (await handle.result()).status == RunStatus.COMPLETED

    # Every run got a module of its own (the sandbox's isolation is intact) ...
    assert executed.count(graph_run.__name__) >= RUNS
    # ... from code compiled at most once in this worker process.
    assert len(loaded) <= 1, loaded


async def test_the_sandbox_s_own_source_strings_are_compiled_once_per_process(
    runner: GraphRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sandbox runs each activation (and each payload's serialization context)
    # as ``exec`` of a source string; Python compiles a string on every exec.
    compiled: list[str] = []
    real_compile = builtins.compile

    def counting_compile(source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(source, str) and "__temporal_" in source:
            compiled.append(source)
        return real_compile(source, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counting_compile)
    sandbox._compiled.cache_clear()
    for _ in range(RUNS):
        handle = await runner.start(one_tool_graph())
        assert (await handle.result()).status == RunStatus.COMPLETED

    info = sandbox._compiled.cache_info()
    # Each distinct string compiled once; the runs' many activations reused them.
    assert info.hits > 10 * RUNS, info
    assert len(compiled) == len(set(compiled)) == info.currsize, compiled
