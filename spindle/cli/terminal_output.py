"""A terminal that prints lines above a live region (``spindle chat``).

Permanent lines scroll up as usual. Below them, the live region holds blocks
that change in place: text an LLM is still streaming, progress bars. Each
update erases the region (cursor up, clear to the end of the screen) and draws
it again, so a permanent line printed meanwhile lands above it. Live rows are
cut to the terminal's width, so each takes exactly one row and the erase is
exact. Without a TTY there is no live region: only permanent lines are written,
and without colour.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from typing import TextIO

RESET = "\x1b[0m"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def visible(text: str) -> str:
    """``text`` without ANSI escape sequences."""
    return _ANSI.sub("", text)


def terminal_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


class TerminalOutput:
    """Permanent lines above a redrawn live region.

    Args:
        out: where to write.
        live: keep a live region (a TTY); else live blocks are ignored.
        color: use ANSI colours.
        width: the terminal's width in columns (read at each redraw).
    """

    def __init__(
        self,
        out: TextIO,
        *,
        live: bool,
        color: bool,
        width: Callable[[], int] = terminal_width,
    ) -> None:
        self.out = out
        self.live = live
        self.color = color
        self._width = width
        self._blocks: dict[str, list[str]] = {}
        self._rows = 0
        self._suspended = False

    def width(self) -> int:
        """The terminal's width in columns."""
        return self._width()

    def paint(self, text: str, code: str) -> str:
        """``text`` in the ANSI style ``code`` (e.g. ``1;32``), when colours are on."""
        return f"\x1b[{code}m{text}{RESET}" if self.color and code else text

    def print(self, text: str) -> None:
        """Write permanent lines (above the live region)."""
        self._erase()
        self.out.write(text + "\n")
        if not self._suspended:
            self._draw()
        else:
            self.out.flush()

    def write_raw(self, text: str) -> None:
        """Write text as it is (a prompt), with the live region erased and not redrawn."""
        self._erase()
        self.out.write(text)
        self.out.flush()

    def set_block(self, key: str, rows: list[str] | None) -> None:
        """Show ``rows`` as the live block ``key`` (None or [] removes it)."""
        if not self.live:
            return
        if rows:
            self._blocks[key] = rows
        elif self._blocks.pop(key, None) is None:
            return
        if not self._suspended:
            self._erase()
            self._draw()

    def has_block(self, key: str) -> bool:
        return key in self._blocks

    def suspend(self) -> None:
        """Erase the live region and hold it (while reading input); ``resume`` redraws it."""
        self._suspended = True
        self._erase()
        self.out.flush()

    def resume(self) -> None:
        self._suspended = False
        self._draw()

    def close(self) -> None:
        """Erase the live region for good."""
        self._blocks.clear()
        self._erase()
        self.out.flush()

    def _erase(self) -> None:
        if self._rows:
            up = f"\x1b[{self._rows - 1}A" if self._rows > 1 else ""
            self.out.write(f"\r{up}\x1b[J")
            self._rows = 0

    def _draw(self) -> None:
        rows = [row for block in self._blocks.values() for row in block]
        if rows:
            limit = max(10, self._width() - 1)
            self.out.write("\n".join(self._fit(row, limit) for row in rows))
            self._rows = len(rows)
        self.out.flush()

    def _fit(self, row: str, limit: int) -> str:
        plain = visible(row)
        if len(plain) <= limit:
            return row
        # A cut row loses its colours: it must not wrap, or the erase would miss a row.
        return plain[: limit - 1] + "…"
