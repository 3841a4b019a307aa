"""What ``pip install spindle`` puts in site-packages: one import name, ``spindle``.

The repository keeps the design's root folders (``shared/``, ``worker/``, ``gateway/``);
``spindle/shared`` and friends are links to them, so the wheel has them under
``spindle.`` and nothing else at the top level.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SKIP = (".git", ".venv", "build", "*.egg-info", "tests", "node_modules", "*_cache", ".hypothesis")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # A copy, so stale files of an in-tree build/ can never reach the wheel.
    source = tmp_path_factory.mktemp("source") / "spindle"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*SKIP))
    out = tmp_path_factory.mktemp("wheel")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run(
        [*pip_wheel, "--no-build-isolation", "--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("spindle-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_installs_one_import_name(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"spindle"}
    top_level = next(n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt"))
    assert wheel.read(top_level).decode().split() == ["spindle"]


def test_the_wheel_carries_every_part_and_its_data(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for path in (
        "spindle/client/__init__.py",
        "spindle/cli/main.py",
        "spindle/settings.py",
        "spindle/shared/contracts/messages.py",
        "spindle/worker/workflows/graph_run.py",
        "spindle/worker/examples/approval-flow.yaml",
        "spindle/gateway/app.py",
        "spindle/gateway/static/index.html",
    ):
        assert path in names, path
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "spindle = spindle.cli.main:main" in wheel.read(entry_points).decode()
