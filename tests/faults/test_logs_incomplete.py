"""Fault: rank-log lines that never reached logs/rank-N.log. The exit status is kept; the
status says the logs are incomplete, never plain "succeeded"."""

from __future__ import annotations

import errno
import io
import threading

from distrun.launch.launcher import _complete
from distrun.launch.logs import StampedWriter
from distrun.model.record import JobOutcome, JobStatus


class FullDisk(io.StringIO):
    name = "logs/rank-0.log"

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_succeeded_job_with_lost_lines_is_succeeded_logs_incomplete() -> None:
    outcome = _complete(JobOutcome(JobStatus.SUCCEEDED, 0), ["tail-1-out"])
    assert outcome.status is JobStatus.SUCCEEDED_LOGS_INCOMPLETE
    assert outcome.status.value == "succeeded-logs-incomplete"
    assert outcome.exitcode == 0 and outcome.logs_complete is False
    assert "tail-1-out" in outcome.message


def test_a_failed_job_keeps_failed_and_its_status_and_complete_logs_change_nothing() -> None:
    failed = _complete(JobOutcome(JobStatus.FAILED, 3, message="boom"), ["tail-0-err"])
    assert failed.status is JobStatus.FAILED and failed.exitcode == 3
    assert failed.message.startswith("boom; ") and not failed.logs_complete
    same = JobOutcome(JobStatus.SUCCEEDED, 0)
    assert _complete(same, []) is same


def test_a_rank_log_that_cannot_be_written_counts_its_lost_lines() -> None:
    writer = StampedWriter(FullDisk(), "out", threading.Lock(), None, "")
    writer.write_lines(["a\n", "b\n"])
    writer.write_lines(["c\n"])
    assert writer.unwritten == 3
