"""docs/architecture.md's package tree is the real one: every package is on it with a
line that says what it holds, and every folder it names exists.

The rule, kept simple on purpose:

- The tree is the first fenced code block after the "## The package tree" heading.
- A folder entry is a line whose name ends with ``/``: at column 0 for a root folder
  (``gateway/``), otherwise after a ``├── `` or ``└── `` branch, indented by one
  four-character unit (``│   `` or four spaces) per level above its parent. Its path
  is its parents' names joined with its own: ``│   └── chat/`` under ``cli/`` under
  ``spindle/`` is ``spindle/cli/chat``. Lines without a branch or a trailing ``/``
  (module lists, a description carried onto the next line) are not entries.
- A package is a directory holding an ``__init__.py`` under ``gateway/``, ``worker/``,
  ``shared/`` or ``spindle/``, found by walking the real folders without following
  links, so ``spindle/gateway`` (a link to ``gateway/``) is not walked a second time.
  Its path is relative to the repository root, e.g. ``gateway/protocols/mcp``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE_ROOTS = ("gateway", "worker", "shared", "spindle")
ENTRY = re.compile(r"^(?P<indent>(?:[│ ]   )*)(?P<branch>[├└]── )?(?P<name>[\w.-]+/)(?P<what>.*)$")


def tree_block() -> list[str]:
    page = PAGE.read_text()
    section = page[page.index("## The package tree") :]
    block = re.search(r"^```[^\n]*\n(.*?)^```", section, re.S | re.M)
    assert block is not None, "docs/architecture.md: no code block under '## The package tree'"
    return block.group(1).splitlines()


def tree_folders() -> dict[str, str]:
    """Each folder entry's path, mapped to what its line says about it."""
    folders: dict[str, str] = {}
    parents: list[str] = []
    for line in tree_block():
        entry = ENTRY.match(line)
        if entry is None or (entry["indent"] and not entry["branch"]):
            continue
        depth = len(entry["indent"]) // 4 + (1 if entry["branch"] else 0)
        parents[depth:] = [entry["name"].rstrip("/")]
        if len(parents) != depth + 1:
            continue  # a branch without a parent line above it: not part of the tree
        folders["/".join(parents)] = entry["what"].strip()
    return folders


def real_packages() -> set[str]:
    packages: set[str] = set()
    for top in PACKAGE_ROOTS:
        for folder, subfolders, files in os.walk(ROOT / top, followlinks=False):
            here = Path(folder)
            subfolders[:] = [
                name
                for name in subfolders
                if name not in {"__pycache__", "node_modules"} and not (here / name).is_symlink()
            ]
            if "__init__.py" in files:
                packages.add(here.relative_to(ROOT).as_posix())
    return packages


def test_the_tree_is_read() -> None:
    folders = tree_folders()
    assert {"gateway", "worker", "shared", "spindle", "spindle/cli/chat"} <= set(folders)


def test_every_package_is_in_the_tree() -> None:
    missing = sorted(real_packages() - set(tree_folders()))
    assert not missing, (
        f"add these packages to the package tree of docs/architecture.md, one line each "
        f"(`name/` under its parent, then what it holds): {missing}"
    )


def test_every_folder_in_the_tree_exists() -> None:
    gone = sorted(path for path in tree_folders() if not (ROOT / path).is_dir())
    assert not gone, f"docs/architecture.md's package tree names folders that are gone: {gone}"


def test_every_folder_in_the_tree_says_what_it_holds() -> None:
    bare = sorted(path for path, what in tree_folders().items() if not what)
    assert not bare, f"give these folders of docs/architecture.md's tree a line: {bare}"
