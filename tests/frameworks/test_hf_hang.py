"""The hang verdict holds for an unchanged Hugging Face Trainer script: rank 1 stops before a
step, rank 0 waits in DDP's gradient all_reduce; distrun names rank 1 (idle, with its stack)
and, by default, lets the job finish."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(360)]
JOB = Path(__file__).parent / "jobs" / "hf_sleeper.py"


def test_hf_trainer_hang_is_named_with_its_culprit(tmp_path: Path, marker: str) -> None:
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run), str(JOB), "30"],
                   tmp_path, timeout=340, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stderr.splitlines() if x.startswith("distrun: HANG"))
    assert line.startswith("distrun: HANG (kind 1, idle): rank 1 has not entered collective"), line
    assert "distrun: stack of rank 1" in done.stderr and "hf_sleeper.py" in done.stderr
    hang = json.loads((run / "hang.json").read_text())
    assert hang["culprits"] == [1] and hang["waiting"] == [0]
    assert "rank 1 trained" in (run / "logs" / "rank-1.log").read_text()
