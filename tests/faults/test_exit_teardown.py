"""Fault: a finished rank aborting at exit (`terminate called without an active exception`,
134) because its process group outlived the interpreter. distrun tears down what it made."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
SCRIPT = Path(__file__).parent / "scripts_no_teardown.py"


def test_the_group_distrun_made_is_destroyed_before_interpreter_teardown(tmp_path: Path,
                                                                         marker: str) -> None:
    run = tmp_path / "run"
    started = time.monotonic()
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run), str(SCRIPT)],
                   tmp_path, timeout=170, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 150
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["logs_complete"] is True
    for rank in (0, 1):
        log = (run / "logs" / f"rank-{rank}.log").read_text()
        assert f"rank {rank} sum 2" in log
        assert "at exit: process group initialised=False" in log
        assert "terminate called" not in log
