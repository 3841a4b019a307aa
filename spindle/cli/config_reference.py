"""The README's configuration table, generated from ``spindle.shared.platform.settings.Settings``.

``python -m spindle.cli.config_reference`` prints the table;
``python -m spindle.cli.config_reference --write README.md`` replaces the table
between the README's markers. A unit test fails when the README's table and
``Settings`` disagree, so a new setting cannot go undocumented.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import AliasChoices

from spindle.shared.platform.settings import Settings

BEGIN_MARKER = "<!-- settings-table:begin (generated: python -m spindle.cli.config_reference) -->"
END_MARKER = "<!-- settings-table:end -->"


def env_names(field_name: str) -> list[str]:
    """The environment variables a setting is read from, in precedence order."""
    alias = Settings.model_fields[field_name].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"SPINDLE_{field_name.upper()}"]


def _default(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def render_settings_table() -> str:
    """A Markdown table: each setting's variables, default and meaning."""
    rows = [
        "| Environment variables | Default | Meaning |",
        "|---|---|---|",
    ]
    for name, info in Settings.model_fields.items():
        names = " / ".join(f"`{env}`" for env in env_names(name))
        meaning = (info.description or "").replace("|", "\\|")
        rows.append(f"| {names} | {_default(info.default)} | {meaning} |")
    return "\n".join(rows)


def replace_table(text: str, table: str) -> str:
    """``text`` with the part between the markers replaced by ``table``.

    Raises:
        ValueError: the markers are missing.
    """
    begin = text.index(BEGIN_MARKER) + len(BEGIN_MARKER)
    end = text.index(END_MARKER, begin)
    return f"{text[:begin]}\n{table}\n{text[end:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", type=Path, metavar="README", help="update this file in place")
    args = parser.parse_args(argv)
    table = render_settings_table()
    if args.write is None:
        sys.stdout.write(table + "\n")
        return 0
    args.write.write_text(replace_table(args.write.read_text(encoding="utf-8"), table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
