"""The README and the docs say what the code does: the configuration table of
docs/operations/configuration.md is the one generated from ``Settings``, the
README's ``spindle dev`` table matches the flags, CI runs exactly the test command
it gives, and the README stays a short front page whose links all lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spindle.cli.config_reference import (
    BEGIN_MARKER,
    CONFIGURATION_PAGE,
    END_MARKER,
    env_names,
    render_settings_table,
)
from spindle.dev.config import DATA_DIR_ENV, HOST_ENV, PORT_OPTIONS
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / CONFIGURATION_PAGE).read_text()
REGENERATE = f"regenerate it: python -m spindle.cli.config_reference --write {CONFIGURATION_PAGE}"
README_MAX_LINES = 250


def settings_table() -> str:
    begin = CONFIGURATION.index(BEGIN_MARKER) + len(BEGIN_MARKER)
    return CONFIGURATION[begin : CONFIGURATION.index(END_MARKER, begin)].strip()


def test_every_setting_has_a_meaning() -> None:
    missing = [name for name, info in Settings.model_fields.items() if not info.description]
    assert not missing, f"give these Settings fields a description=: {missing}"


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_setting_is_in_the_configuration_table(field: str) -> None:
    rows = [row for row in settings_table().splitlines() if f"`{env_names(field)[0]}`" in row]
    assert rows, f"Settings.{field} is missing from {CONFIGURATION_PAGE}'s table; {REGENERATE}"


def test_configuration_table_is_the_generated_one() -> None:
    assert settings_table() == render_settings_table(), f"the table is stale; {REGENERATE}"


def test_readme_dev_table_matches_the_flags() -> None:
    rows = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| `(--[a-z-]+)`[^|]*\| `([A-Z_]+)` \| `([^`]+)` \|$", README, re.M)
    }
    expected = {option.flag: (option.env, str(option.default)) for option in PORT_OPTIONS}
    expected["--host"] = (HOST_ENV, "127.0.0.1")
    expected["--data-dir"] = (DATA_DIR_ENV, "./.spindle")
    assert rows == expected


def test_ci_runs_exactly_the_readme_test_command() -> None:
    section = README[README.index("Run the whole test suite") :]
    command = re.search(r"```bash\n(.+?)\n```", section, re.S)
    assert command is not None
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command.group(1).strip() in [line.strip() for line in ci_lines]


def test_readme_is_short() -> None:
    lines = len(README.splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/"
    )


def test_readme_relative_links_lead_to_files() -> None:
    """Every relative link of the README (``[text](path)`` or ``[text](path#anchor)``)
    names a file or folder of the repository."""
    targets = re.findall(r"\]\(([^)\s]+)\)", README)
    relative = [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t)]
    assert relative, "the README links into docs/"
    missing = [t for t in relative if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
