"""Fault: rank 1 raises; rank 0 then dies in a collective ("Connection closed by peer").
torchelastic names rank 0 first; distrun names the rank whose error is the cause."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from distrun.launch.firstfail import LogError, first_error, pick_first
from distrun.model.record import RankFailure
from tests.conftest import run_cli

SCRIPT = Path(__file__).parent / "scripts_first_fail.py"


def failure(rank: int, message: str, at: float, signal: str | None = None) -> RankFailure:
    return RankFailure(rank=rank, local_rank=rank, pid=100 + rank, exitcode=1, signal=signal,
                       time=at, error_file=None, message=message)


def test_a_consequence_that_came_first_is_not_the_first_failure() -> None:
    failures = (failure(0, "exited with code 1", 10.0), failure(1, "exited with code 1", 11.0))
    errors = {0: LogError(5.0, "RuntimeError: [pair.cc:534] Connection closed by peer [::1]:1"),
              1: LogError(5.0, "KeyError: 'shape'")}
    assert pick_first(failures, errors, 0) == 1


def test_the_earliest_cause_wins_and_only_consequences_fall_back_to_time() -> None:
    failures = (failure(0, "ValueError: a", 10.0), failure(1, "ValueError: b", 9.0))
    assert pick_first(failures, {0: LogError(1.0, "ValueError: a"),
                                 1: LogError(2.0, "ValueError: b")}, 1) == 0
    both = (failure(0, "Connection reset by peer", 10.0),
            failure(1, "killed by SIGTERM", 9.0, "SIGTERM"))
    assert pick_first(both, {}, 0) == 1


def test_first_error_reads_the_traceback_start_and_its_exception_line(tmp_path: Path) -> None:
    log = tmp_path / "rank-1.log"
    log.write_text("2026-01-01T00:00:00.000001Z out step 1\n"
                   "2026-01-01T00:00:01.250000Z err Traceback (most recent call last):\n"
                   "2026-01-01T00:00:01.250000Z err   File \"x.py\", line 3\n"
                   "2026-01-01T00:00:01.300000Z err [rank1]: KeyError: 'shape [/] mismatch'\n")
    error = first_error(log)
    assert error is not None and error.line == "KeyError: 'shape [/] mismatch'"
    assert error.time == pytest.approx(1767225601.25)
    assert first_error(tmp_path / "absent.log") is None


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_rank_1_raises_rank_0_dies_after_it_distrun_names_rank_1(tmp_path: Path,
                                                                  marker: str) -> None:
    run = tmp_path / "runs" / "[exp1]" / "a[/]b"
    started = time.monotonic()
    # --stall-action warn: the hang watch (a separate fault) would stop the job before
    # torchelastic reports the ranks' failures; here the ranks' own ends are under test
    done = run_cli(["launch", "--nproc-per-node", "2", "--stall-action", "warn", "--run-dir",
                    str(run), str(SCRIPT)], tmp_path, timeout=200, env={"DISTRUN_TEST_MARK": marker})
    assert time.monotonic() - started < 200
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "rank 1 first" in out and "shape [/] mismatch" in out, out[-3000:]
    assert "[exp1]" in out and "a[/]b" in out
    assert "MarkupError" not in out and "/rich/" not in out  # the ranks' own tracebacks only
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["first_failure"] == 1
    assert summary["failures"]["1"]["role"] == "first failure"
    rank0 = (run / "logs" / "rank-0.log").read_text()
    assert "rank 0 step 2" in rank0 and "rank 0 step 3" not in rank0
