"""Fault: text in brackets read as rich markup. A run directory named `a[/]b` or `[exp1]`
and a rank error `KeyError("shape [/] mismatch")` are printed as they are."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
SCRIPT = Path(__file__).parent / "scripts_ok.py"


def test_a_succeeded_job_in_a_bracketed_run_directory_says_so(tmp_path: Path,
                                                               marker: str) -> None:
    run = tmp_path / "runs" / "[exp1]" / "a[/]b"
    started = time.monotonic()
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run), str(SCRIPT)],
                   tmp_path, timeout=150, env={"DISTRUN_TEST_MARK": marker})
    assert time.monotonic() - started < 150
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert f"run directory: {run}" in out
    assert "MarkupError" not in out and "Traceback" not in out
    assert json.loads((run / "summary.json").read_text())["status"] == "succeeded"
    assert (run / "logs" / "rank-1.log").read_text().count(" out rank 1 line ") == 20
    # the rank error with brackets: tests/faults/test_first_failure.py (real processes)
