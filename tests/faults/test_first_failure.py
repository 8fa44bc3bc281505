"""Fault: rank 1 raises; rank 0 then dies in a collective ("Connection closed by peer").
torchelastic names rank 0 first; distrun names the rank whose error is the cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.launch.firstfail import LogError, first_error, pick_first
from distrun.model.record import RankFailure


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

# the real-process run (rank 1 raises, rank 0 dies after it): tests/faults/test_matrix.py
