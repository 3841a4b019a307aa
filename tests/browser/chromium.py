"""Debian's Chromium as the browser tests and the browser benchmark start it.

Nothing is downloaded (no ``playwright install``): the flags keep a headless
Chromium from reaching for the network this machine does not have.
"""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
