"""Engine readings added by eng9b (issue 12): srun's report of how its tasks ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose


def _write(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log


def _verdict(tmp_path: Path, lines: list[str]) -> tuple[str, int | None, str | None]:
    found = diagnose([_write(tmp_path, lines)])
    root = found.causes[0] if found.causes else None
    return (root.rule.id if root else "-", root.rank if root else None, found.confidence)


# srun's report of a node's tasks (Slurm src/srun/launch.c _task_finish): "%s: %s %s: %s%s",
# hosts, "task"/"tasks", the task list, strsignal() of the signal that ended them; "Out Of
# Memory" when slurmstepd saw the cgroup's OOM kill; "Exited with exit code %d" otherwise.
# srun: launch/slurm: _step_signal: "Terminating %ps" (--kill-on-bad-exit, or the step's end).
STEP = "srun: launch/slurm: _step_signal: Terminating StepId=4242.0"
TRAINING = ["epoch 0 step 120 loss 2.3121", "epoch 0 step 130 loss 2.2987"]


def test_srun_reporting_a_task_sigterm_names_a_stop_on_that_task(tmp_path: Path) -> None:
    # the old reading peeled the report down to a bare "Terminated", which no rule knows
    lines = [*TRAINING, "srun: error: node12: tasks 0-3: Terminated"]
    assert _verdict(tmp_path, lines) == ("stopped-externally", 0, "low")


def test_srun_reporting_a_task_sigkill_is_strong_evidence_for_that_task(tmp_path: Path) -> None:
    # the old reading matched only the weak bare "Killed" (low confidence)
    lines = [*TRAINING, "srun: error: node12: task 5: Killed", STEP]
    assert _verdict(tmp_path, lines) == ("host-oom-or-killed", 5, "medium")


def test_srun_reporting_a_task_sigkill_is_found_in_a_big_log_too(tmp_path: Path) -> None:
    # over SMALL_BYTES the line finder sees raw lines, the srun prefix still on them
    filler = "epoch 0 step 100 loss 2.3121 lr 0.0001 tokens/s 81234 " * 2
    lines = [filler] * (5 * 1024 * 1024 // len(filler)) + [
        "srun: error: node12: task 5: Killed", STEP]
    assert _verdict(tmp_path, lines) == ("host-oom-or-killed", 5, "medium")


def test_srun_reporting_out_of_memory_keeps_the_task(tmp_path: Path) -> None:
    lines = [*TRAINING, "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of "
             "your processes may have been killed by the cgroup out-of-memory handler.",
             "srun: error: node12: task 3: Out Of Memory", STEP]
    assert _verdict(tmp_path, lines) == ("host-oom-or-killed", 3, "medium")


@pytest.mark.parametrize("signal", ["Killed", "Terminated"])
def test_a_signal_srun_reports_after_another_task_failed_is_the_teardown(
        tmp_path: Path, signal: str) -> None:
    # --kill-on-bad-exit: task 4 failed first, then srun had the step's other tasks signalled;
    # the old reading named the killed tasks (host-oom-or-killed on rank 0) or nothing
    lines = [*TRAINING, "srun: error: node12: task 4: Exited with exit code 1", STEP,
             f"srun: error: node11: tasks 0-3: {signal}"]
    assert _verdict(tmp_path, lines)[:2] == ("elastic-summary-no-root-cause", 4)


def test_a_signal_srun_reports_after_the_step_was_cancelled_is_the_stop(tmp_path: Path) -> None:
    lines = [*TRAINING, "slurmstepd: error: *** STEP 4242.0 ON node12 CANCELLED AT "
             "2025-01-07T10:00:00 DUE TO TIME LIMIT ***",
             "srun: error: node12: tasks 0-3: Terminated", "srun: error: node13: tasks 4-7: Killed"]
    assert _verdict(tmp_path, lines) == ("stopped-externally", None, "high")


# Launchers' own lines that name the rank that failed (read when no prefix names one).
@pytest.mark.parametrize(("line", "rank"), [
    # horovod runner/gloo_run.py _exec_command: the failed slot's index
    ("Terminating remaining workers after failure of Process 2.", 2),
    # PaddlePaddle fleet launch_utils.py watch_local_trainers: error_rank is a list
    ("ABORT!!! Out of all 8 trainers, the trainer process with rank=[2, 3] was aborted. "
     "Please check its log.", 2),
    # MosaicML composer cli/launcher.py
    ("Global rank 3 (PID 4242) exited with code 1", 3),
])
def test_a_launcher_line_names_the_rank_that_failed(tmp_path: Path, line: str, rank: int) -> None:
    cuda_oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
                "a total capacity of 79.15 GiB of which 1.02 GiB is free.")
    assert _verdict(tmp_path, [*TRAINING, line])[:2] == ("elastic-summary-no-root-cause", rank)
    # a cause no line names a rank for takes the rank the launcher names
    assert _verdict(tmp_path, [*TRAINING, cuda_oom, line])[:2] == ("cuda-out-of-memory", rank)


def _elastic(root: tuple[int, str], others: list[tuple[int, str]]) -> list[str]:
    """torchrun's end of a failed run as torch 2.x prints it: elastic/multiprocessing/api.py
    ("Sending process %s closing signal %s" to the workers still running, then "failed
    (exitcode: %s) local_rank: %s (pid: %s) of binary: %s" for the first failure) and the
    ChildFailedError summary (errors/__init__.py _FAILURE_FORMAT_TEMPLATE)."""
    def block(index: int, rank: int, code: str) -> list[str]:
        signal = {"-15": " (SIGTERM)", "-1": " (SIGHUP)"}.get(code, "")
        why = (f"Signal {code[1:]}{signal} received by PID {4240 + rank}" if signal
               else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
        return [f"[{index}]:", "  time      : 2025-01-07_10:00:00", "  host      : node1",
                f"  rank      : {rank} (local_rank: {rank})",
                f"  exitcode  : {code} (pid: {4240 + rank}){signal}", "  error_file: <N/A>",
                f"  traceback : {why}"]
    api = "torch/distributed/elastic/multiprocessing/api.py"
    lines = [f"W0107 10:00:00.100000 4200 {api}:1028] Sending process {4240 + r} closing signal "
             "SIGTERM" for r, _ in others]
    lines += [f"E0107 10:00:00.200000 4200 {api}:1002] failed (exitcode: {root[1]}) local_rank: "
              f"{root[0]} (pid: {4240 + root[0]}) of binary: /usr/bin/python3",
              "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
              "=" * 60, "train.py FAILED", "-" * 60, "Failures:"]
    for index, (rank, code) in enumerate(others, start=1):
        lines += block(index, rank, code)
    lines += [] if others else ["  <NO_OTHER_FAILURES>"]
    return [*lines, "-" * 60, "Root Cause (first observed failure):", *block(0, *root), "=" * 60]


def test_a_lone_sigterm_as_the_first_failure_is_a_stop_from_outside(tmp_path: Path) -> None:
    # the old reading: the launcher's summary, no root cause
    lines = [*TRAINING, *_elastic((1, "-15"), [(0, "-15")])]
    assert _verdict(tmp_path, lines) == ("stopped-externally", 1, "medium")


def test_torchelastic_stopping_the_others_after_a_failure_is_no_stop(tmp_path: Path) -> None:
    # rank 1 failed (its error is elsewhere); torchelastic then sent SIGTERM to rank 0
    lines = [*TRAINING, *_elastic((1, "1"), [(0, "-15")])]
    assert _verdict(tmp_path, lines) == ("elastic-summary-no-root-cause", 1, "medium")


def test_a_sigterm_first_failure_after_a_collective_timeout_is_no_stop(tmp_path: Path) -> None:
    # ProcessGroupNCCL's watchdog (torch 2.x ProcessGroupNCCL.cpp): another failure is in the logs
    timeout = ("[rank0]:[E107 10:00:00.000000 4240 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog "
               "caught collective operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, "
               "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600023 milliseconds before "
               "timing out.")
    lines = [*TRAINING, timeout, *_elastic((1, "-15"), [(0, "-15")])]
    assert _verdict(tmp_path, lines)[0] != "stopped-externally"


def test_the_teardown_after_a_killed_report_names_no_first_failure(tmp_path: Path) -> None:
    # task 5 was killed, and srun had the others signalled (--kill-on-bad-exit): tasks 4,6-7
    # are no first failure, so the unprefixed CUDA OOM is not put on rank 4 (the old reading)
    lines = [*TRAINING, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
             "srun: error: gpu-03: task 5: Killed", STEP,
             "srun: error: gpu-03: tasks 4,6-7: Killed", "srun: error: gpu-02: tasks 0-3: Killed"]
    assert _verdict(tmp_path, lines) == ("cuda-out-of-memory", None, "medium")
