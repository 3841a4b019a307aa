"""``spindle graphs register`` / ``list`` as a user runs them, against the
session's real MongoDB wire server."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import orjson
import pytest

from spindle.dev.processes import free_port
from spindle.shared.graphs.structure import parse_graph
from tests.cli_runner import run_spindle

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "worker" / "examples"


def spindle(*args: str, mongo_url: str, db: str) -> subprocess.CompletedProcess[str]:
    return run_spindle(*args, SPINDLE_MONGO_URL=mongo_url, SPINDLE_MONGO_DB=db)


@pytest.fixture
def db() -> str:
    return f"cli_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    text = (EXAMPLES / "pipeline.yaml").read_text().replace("name: pipeline", "name: my-pipeline")
    path = tmp_path / "good.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(
        orjson.dumps(
            {
                "name": "bad",
                "entry": "start",
                "nodes": [{"id": "start", "type": "teleport"}, {"id": "end", "type": "output"}],
                "edges": [{"from": "start", "to": "end"}],
            }
        ).decode()
    )
    return path


def listed(mongo_url: str, db: str) -> list[dict[str, object]]:
    result = spindle("graphs", "list", "--json", mongo_url=mongo_url, db=db)
    assert result.returncode == 0, result.stderr
    graphs: list[dict[str, object]] = orjson.loads(result.stdout)
    return graphs


def test_an_invalid_file_is_named_and_nothing_is_stored(
    mongo_url: str, db: str, good_file: Path, bad_file: Path
) -> None:
    result = spindle(
        "graphs", "register", str(good_file), str(bad_file), mongo_url=mongo_url, db=db
    )

    assert result.returncode == 1
    assert result.stderr.startswith("spindle: error: ")
    assert str(bad_file) in result.stderr
    assert "'start'" in result.stderr and "teleport" in result.stderr
    assert str(good_file) not in result.stderr
    assert listed(mongo_url, db) == []


def test_registered_files_and_examples_are_listed(mongo_url: str, db: str, good_file: Path) -> None:
    result = spindle("graphs", "register", str(good_file), "--examples", mongo_url=mongo_url, db=db)
    assert result.returncode == 0, result.stderr
    assert "my-pipeline" in result.stdout

    graphs = {g["name"]: g for g in listed(mongo_url, db)}
    example_names = {path.stem for path in EXAMPLES.glob("*.yaml")}
    assert set(graphs) == example_names | {"my-pipeline"}
    assert parse_graph(graphs["my-pipeline"]) == parse_graph(good_file.read_text())

    table = spindle("graphs", "list", mongo_url=mongo_url, db=db)
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["NAME", "VERSION", "NODES", "DESCRIPTION"]
    assert any(line.startswith("my-pipeline ") for line in table.stdout.splitlines())


def test_unreachable_mongodb_is_reported(db: str, good_file: Path) -> None:
    result = spindle(
        "graphs", "register", str(good_file), mongo_url=f"mongodb://127.0.0.1:{free_port()}", db=db
    )
    assert result.returncode == 1
    assert "cannot connect to MongoDB" in result.stderr
    assert "setting mongo_url: SPINDLE_MONGO_URL" in result.stderr
