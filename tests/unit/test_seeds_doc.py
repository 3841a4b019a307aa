"""docs/seeds.md, the table of every seed requirement, cannot go stale silently.

Each row names the code that does the requirement (the last column, repository
paths in backticks). A module renamed or removed makes the row point nowhere, so
every path named must exist; the counts at the top of the page must be the
counts of the tables below them.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "seeds.md"
SEEDS = ("000", "001", "002", "003", "004")
STATUSES = ("met", "partly", "missing", "not planned")
ROW = re.compile(r"^\| (?P<seed>\d{3})\.(?P<n>\d+) \|(?P<rest>.*)\|\s*$")
SUMMARY = re.compile(r"^\| \[(?P<seed>\d{3})\]\(#[^)]*\) \|")
TOTAL = re.compile(r"^\| \*\*All\*\* \|")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def _rows() -> list[list[str]]:
    rows = [_cells(line) for line in PAGE.read_text().splitlines() if ROW.match(line)]
    assert rows, "no requirement rows found in docs/seeds.md"
    return rows


def test_every_row_is_well_formed() -> None:
    ids: Counter[str] = Counter()
    for cells in _rows():
        assert len(cells) == 6, f"row {cells[0]}: 6 cells expected, got {len(cells)}"
        row_id, _section, requirement, status, docs, code = cells
        ids[row_id] += 1
        assert row_id[:3] in SEEDS, f"row {row_id}: unknown seed"
        assert requirement, f"row {row_id}: no requirement"
        assert status in STATUSES, f"row {row_id}: status {status!r} not one of {STATUSES}"
        assert docs.startswith("["), f"row {row_id}: no docs link"
        assert code.startswith("`"), f"row {row_id}: no code path"
    duplicates = [row_id for row_id, n in ids.items() if n > 1]
    assert not duplicates, f"row ids used twice: {duplicates}"


def test_every_code_path_exists() -> None:
    missing = []
    for cells in _rows():
        paths = re.findall(r"`([^`]+)`", cells[5])
        assert paths, f"row {cells[0]}: no path in the code column"
        missing += [f"{cells[0]}: {p}" for p in paths if not (ROOT / p).is_file()]
    assert not missing, "docs/seeds.md names code that does not exist:\n" + "\n".join(missing)


def test_every_docs_link_names_a_page() -> None:
    missing = []
    for cells in _rows():
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", cells[4]):
            if not (PAGE.parent / target).is_file():
                missing.append(f"{cells[0]}: {target}")
    assert not missing, "docs/seeds.md links pages that do not exist:\n" + "\n".join(missing)


def test_summary_counts_match_the_tables() -> None:
    counted: dict[str, Counter[str]] = {seed: Counter() for seed in SEEDS}
    for cells in _rows():
        counted[cells[0][:3]][cells[3]] += 1
    summary: dict[str, list[int]] = {}
    total: list[int] | None = None
    for line in PAGE.read_text().splitlines():
        match = SUMMARY.match(line)
        if match:
            summary[match["seed"]] = [int(n) for n in _cells(line)[-4:]]
        elif TOTAL.match(line):
            total = [int(n) for n in _cells(line)[-4:]]
    assert sorted(summary) == list(SEEDS), "the summary table needs one line per seed"
    for seed in SEEDS:
        expected = [counted[seed][status] for status in STATUSES]
        assert summary[seed] == expected, (
            f"seed {seed}: summary says {summary[seed]}, tables have {expected} "
            f"({' / '.join(STATUSES)})"
        )
    all_rows = [sum(counted[seed][status] for seed in SEEDS) for status in STATUSES]
    assert total == all_rows, f"the **All** line says {total}, tables have {all_rows}"
