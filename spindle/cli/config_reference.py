"""The docs' configuration table, generated from ``spindle.shared.platform.settings.Settings``.

The table lives in ``docs/operations/configuration.md`` (``CONFIGURATION_PAGE``).
``python -m spindle.cli.config_reference`` prints it;
``python -m spindle.cli.config_reference --write docs/operations/configuration.md``
replaces the table between that page's markers. A unit test fails when the page's
table and ``Settings`` disagree, so a new setting cannot go undocumented.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import AliasChoices

from spindle.shared.platform.settings import Settings

BEGIN_MARKER = "<!-- settings-table:begin (generated: python -m spindle.cli.config_reference) -->"
END_MARKER = "<!-- settings-table:end -->"
# The page that holds the table, relative to the repository root.
CONFIGURATION_PAGE = "docs/operations/configuration.md"


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
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
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
        default = info.get_default(call_default_factory=True)
        rows.append(f"| {names} | {_default(default)} | {meaning} |")
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
    parser.add_argument(
        "--write",
        type=Path,
        metavar="PAGE",
        help=f"update this file in place ({CONFIGURATION_PAGE})",
    )
    args = parser.parse_args(argv)
    table = render_settings_table()
    if args.write is None:
        sys.stdout.write(table + "\n")
        return 0
    args.write.write_text(replace_table(args.write.read_text(encoding="utf-8"), table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
