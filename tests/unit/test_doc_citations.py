"""Code cites pages that exist: every ``docs/….md`` a source file names is in the
repository, and every ``docs/design.md §n`` names a section that page has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("shared", "worker", "gateway", "spindle", "tests", "deploy", ".ci")
CITATION = re.compile(r"docs/[\w/.-]+?\.md")
SECTION = re.compile(r"docs/design\.md[^\n§]{0,3}§ ?(\d+)((?:\s*(?:,|and)\s*§?\s*\d+)*)")


def _source_files() -> list[Path]:
    files: list[Path] = []
    for top in SOURCES:
        for path in (ROOT / top).rglob("*"):
            skipped = "node_modules" in path.parts or "__pycache__" in path.parts
            readable = path.suffix in {".py", ".yaml", ".yml", ".js", ".sh", ""}
            if readable and path.is_file() and not skipped and not path.is_symlink():
                files.append(path)
    return files


def test_cited_docs_pages_exist() -> None:
    missing = {
        f"{path.relative_to(ROOT)}: {page}"
        for path in _source_files()
        for page in CITATION.findall(path.read_text(errors="ignore"))
        if not (ROOT / page).is_file()
    }
    assert not missing, sorted(missing)


def test_cited_design_sections_exist() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    sections = {int(n) for n in re.findall(r"^## §(\d+)\.", design, re.M)}
    cited: set[int] = set()
    for path in _source_files():
        for first, rest in SECTION.findall(path.read_text(errors="ignore")):
            cited |= {int(first), *(int(n) for n in re.findall(r"\d+", rest))}
    assert cited, "the code cites docs/design.md sections"
    assert cited <= sections, sorted(cited - sections)
