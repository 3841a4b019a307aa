"""schemathesis against the live gateway's OpenAPI document.

The schemathesis command line (the same tool CI users run) loads
``/openapi.json`` from the e2e gateway over real HTTP and calls every
operation as tenant A: the schema's own examples, the coverage phase's
boundary and edge values, and a bounded number of generated valid and invalid
requests. It follows the ids a response returns (a started run's
``workflow_id``/``run_id``) into the per-run routes, the SSE stream included.

No request may get a 5xx; a valid request must get a documented status,
content type and body (SSE events included); an invalid one must be refused
with a 4xx. Generation is deterministic, so a failure reproduces; the report
names each failing request with the curl command that repeats it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import pytest

from spindle.dev.processes import bin_path
from tests.e2e.conftest import SpindleStack

pytestmark = pytest.mark.e2e

MAX_EXAMPLES = 10  # generated requests per operation and generation mode
REQUEST_TIMEOUT = 10.0
RUN_TIMEOUT = 300.0  # the whole schemathesis run; well under a minute on 2 cores when idle
# The checks run (all others are off); invalid input may be refused with any of
# the listed statuses (413 when it is too large).
CONFIG = """
[checks]
enabled = false
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true
response_headers_conformance.enabled = true
# Declared security schemes: a request without (or with wrong) credentials must be refused.
ignored_auth.enabled = true

[checks.negative_data_rejection]
enabled = true
expected-statuses = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]

# Every multipart part travels as bytes, so a part of the "wrong type" (a number
# where a file belongs) is the same request as a valid one.
[[operations]]
include-path-regex = "/files$"
include-method = "POST"
checks.negative_data_rejection.enabled = false

# A run's stream stays open while the run lives (a paused run only sends
# keep-alives): read one event, and give up on a silent stream after 2 s.
[[operations]]
include-path-regex = "/stream$"
max-stream-events = 1
request-timeout = 2

# An AG-UI run streams while the run lives, like a run's stream.
[[operations]]
include-path-regex = "^/agui/"
max-stream-events = 1
request-timeout = 2
"""
REPORT_TAIL_CHARS = 20_000


@pytest.mark.timeout(RUN_TIMEOUT + 120)
async def test_no_operation_answers_with_a_server_error_or_off_its_schema(
    stack: SpindleStack,
    http: httpx.AsyncClient,
    examples: list[str],
    tmp_path: Path,
    artifacts_dir: Path,
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    reports = artifacts_dir / "schemathesis"
    argv = [
        bin_path("schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"{stack.base_url}/openapi.json",
        "--header",
        f"Authorization: {http.headers['Authorization']}",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--generation-deterministic",
        "--no-shrink",
        # One worker: with two threads, CPython 3.11's ast module (used by
        # hypothesis to describe strategies) can fail with "AST constructor
        # recursion depth mismatch", a tool error that is not the server's.
        "--workers",
        "1",
        "--request-timeout",
        str(REQUEST_TIMEOUT),
        "--suppress-health-check",
        "all",
        "--report",
        "junit",
        "--report-dir",
        str(reports),
        "--no-color",
    ]
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        pytest.fail(f"schemathesis did not finish within {RUN_TIMEOUT:.0f}s")
    text = output.decode("utf-8", "replace")
    (reports / "output.txt").write_text(text)

    assert "Operations:" in text, text[-REPORT_TAIL_CHARS:]
    report = text[text.find("FAILURES") :] if "FAILURES" in text else text
    assert process.returncode == 0, report[:REPORT_TAIL_CHARS]
    assert (await http.get("/healthz")).status_code == 200
    # The schedules it created would start runs for the rest of the session.
    for schedule in (await http.get("/schedules")).json()["schedules"]:
        await http.delete(f"/schedules/{schedule['id']}")
