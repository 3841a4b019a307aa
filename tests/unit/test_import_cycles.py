"""No import cycles among Spindle's modules, function-level imports included.

The graph is built from the source tree with ``ast`` (nothing is imported):
every ``import`` at module level or inside a function or class counts, since a
function-level import that closes a cycle only hides it; imports under
``if TYPE_CHECKING:`` do not run and are left out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# Package name -> source folder (spindle/shared, worker, gateway are links to these).
PACKAGES = {
    "spindle": ROOT / "spindle",
    "spindle.shared": ROOT / "shared",
    "spindle.worker": ROOT / "worker",
    "spindle.gateway": ROOT / "gateway",
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[0] in ("shared", "worker", "gateway") and package == "spindle":
                continue  # the links: walked under their own name
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Every name ``module`` imports (with ``from x import y``: ``x.y`` and ``x``)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import):
                yield from (alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".")[: None if is_package else -1]
                    anchor = package[: len(package) - child.level + 1]
                    base = ".".join([*anchor, *([child.module] if child.module else [])])
                yield base
                yield from (f"{base}.{alias.name}" for alias in child.names)
            stack.append(child)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set()
        for imported in _imports(tree, module, path.name == "__init__.py"):
            name = imported
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_function_level_imports() -> None:
    graph = _graph()
    # build_activities imports what it wires inside the function only.
    assert "spindle.worker.offerings" in graph["spindle.worker.activities"]
    assert "spindle.gateway.api.deps" in graph["spindle.gateway.app"]


def test_no_import_cycles() -> None:
    assert [sorted(c) for c in _cycles(_graph())] == []
