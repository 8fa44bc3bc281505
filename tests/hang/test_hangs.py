"""Real processes, plain torch scripts that import nothing from distrun (gloo, this host): each
hang named by kind with its culprit, the record in the run directory, the default that never
throws away good work, the positive proof on a healthy job, and nothing left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distrun.monitor.hang import BUSY_CPU_PERCENT, cause_line, timeout_note
from tests.conftest import cli_env, run_cli

pytestmark = [pytest.mark.slow]
JOBS = Path(__file__).parent / "jobs"


def launch(tmp_path: Path, marker: str, nproc: int, script: str, *args: str,
           timeout: float = 150, flags: tuple[str, ...] = (),
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = ["launch", "--nproc-per-node", str(nproc), "--run-dir", str(tmp_path / "run"),
            *flags, script if "-m" in flags else str(JOBS / script), *args]
    return run_cli(argv, tmp_path, timeout=timeout,
                   env={"DISTRUN_TEST_MARK": marker, **(env or {})})


def events(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def hang_line(stderr: str) -> str:
    line = next((x for x in stderr.splitlines() if x.startswith("distrun: HANG")), None)
    assert line is not None, f"no HANG line in:\n{stderr[-4000:]}"
    return line


@pytest.mark.timeout(240)
def test_kind_1_rank_2_of_4_sleeps_before_an_all_reduce(tmp_path: Path, marker: str) -> None:
    started = time.monotonic()
    done = launch(tmp_path, marker, 4, "sleeper.py", "2", "30")
    assert done.returncode == 0, done.stderr[-3000:]  # waiting succeeded: nothing thrown away
    line = hang_line(done.stderr)
    assert line.startswith("distrun: HANG (kind 1, idle): rank 2 has not entered collective #4 "
                           "(gloo:all_reduce [[1000]], process group 0) that ranks 0, 1, 3 "
                           "wait in for"), line
    assert "rank 2 is idle outside any collective" in line
    assert "distrun: stack of rank 2 (py-spy):" in done.stderr
    assert "main (sleeper.py:18)" in done.stderr  # the culprit's own line: time.sleep
    assert "distrun: hang resolved: rank 2 caught up" in done.stderr
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["kind"] == "idle" and hang["culprits"] == [2] and hang["waiting"] == [0, 1, 3]
    assert {(e["waiter"], e["culprit"]) for e in hang["waiting_graph"]} == {
        (0, 2), (1, 2), (3, 2)}
    assert "sleeper.py:18" in hang["stacks"]["2"]["text"]
    assert cause_line(hang)[1] == [2]
    [event] = events(tmp_path, "hang")
    assert event["culprits"] == [2] and event["collective"]["seq"] == 4
    assert 10 <= hang["waited_s"] <= 15  # named within 15 s of the hang
    assert time.monotonic() - started < 200


@pytest.mark.timeout(180)
def test_p2p_rank_0_waits_in_recv_while_rank_1_sleeps_before_its_send(
        tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, "p2p_sleeper.py", "15")
    assert done.returncode == 0, done.stderr[-3000:]  # waiting succeeded: nothing thrown away
    line = hang_line(done.stderr)
    assert line.startswith("distrun: HANG (kind 1, idle): rank 0 waits in recv from rank 1 "
                           "(p2p #2, [5] float32, process group 0, tag 0) for "), line
    # the CPU share is measured (0 % or 1 % for a sleeping rank on a loaded machine); idle
    # means under hang.BUSY_CPU_PERCENT
    idle = re.search(r"rank 1 has not entered the matching send: rank 1 is idle \(([0-9]+)% "
                     r"CPU; it entered 1 send\(s\) to rank 0\)", line)
    assert idle is not None and int(idle.group(1)) < BUSY_CPU_PERCENT, line
    assert "main (p2p_sleeper.py:24)" in done.stderr  # rank 1's own line: time.sleep
    assert "distrun: hang resolved: rank 1 caught up and p2p #2 (recv from rank 1" in done.stderr
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["kind"] == "idle" and hang["culprits"] == [1] and hang["waiting"] == [0]
    assert hang["collective"] == {"pg": "0", "seq": 2, "op": "recv", "sizes": [[5]],
                                  "p2p": True, "send": False, "peer": 1}
    assert 10 <= hang["waited_s"] <= 15  # named within 15 s of the hang


@pytest.mark.timeout(180)
def test_every_rank_idle_outside_any_collective_is_named_and_stopped_by_stall_timeout(
        tmp_path: Path, marker: str) -> None:
    lock = tmp_path / "torch_extensions" / "fused_adam" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # left behind by a JIT build that was killed
    started = time.monotonic()
    done = launch(tmp_path, marker, 2, "stale_lock.py", str(lock),
                  flags=("--stall-timeout", "8"))
    assert done.returncode == 124, done.stderr[-3000:]
    line = hang_line(done.stderr)
    assert line.startswith("distrun: HANG (kind 1, idle): no rank has made progress for "), line
    assert ("ranks 0, 1 are idle outside any collective" in line
            and "since collective #1 of process group 0 completed" in line), line
    assert "wait (torch/utils/file_baton.py" in done.stderr  # each rank's stack, by py-spy
    hints = [ln for ln in done.stderr.splitlines() if "JIT-built C++/CUDA extension" in ln]
    assert [h.split(" waits")[0] for h in hints] == ["distrun: rank 0", "distrun: rank 1"]
    assert "delete the 'lock' file" in hints[0]
    assert "distrun: stopping the job: no progress for" in done.stderr
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["kind"] == "idle" and hang["culprits"] == [0, 1] and hang["waiting"] == []
    assert cause_line(hang)[0].startswith("rank 0, 1 sat idle outside any collective")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "stalled"
    assert lock.exists()  # distrun names the lock; removing it is the user's call
    diagnosed = run_cli(["diagnose", str(tmp_path / "run")], tmp_path, timeout=60)
    assert "Root cause: Stall or lost node recorded by distrun" in diagnosed.stdout
    assert "ranks 0, 1: waits for the lock of a JIT-built" in diagnosed.stdout
    assert time.monotonic() - started < 90


@pytest.mark.timeout(420)
def test_kind_2_rank_0_busy_90_s_before_a_barrier_finishes_with_exit_0(
        tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, "busy_rank0.py", "90", timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    line = hang_line(done.stderr)
    assert line.startswith("distrun: HANG (kind 2, busy): rank 0 has not entered collective "
                           "#2 (gloo:barrier"), line
    assert "rank 0 is busy outside the collective" in line
    assert "the job keeps running" in done.stderr and "stopping the job" not in done.stderr
    assert "rank 0 done 4" in done.stdout and "job succeeded" in done.stderr


@pytest.mark.timeout(180)
def test_kind_3_all_reduce_against_broadcast_is_stopped(tmp_path: Path, marker: str) -> None:
    started = time.monotonic()
    done = launch(tmp_path, marker, 2, "mismatch.py")
    assert done.returncode == 124, done.stderr[-3000:]
    line = hang_line(done.stderr)
    assert line.startswith("distrun: HANG (kind 3, mismatch): collective mismatch at "
                           "collective #2"), line
    assert "rank 0: gloo:all_reduce [[10]]" in line and "rank 1: gloo:broadcast [[10]]" in line
    assert "distrun: stopping the job: waiting cannot succeed" in done.stderr
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["kind"] == "mismatch" and hang["must_stop"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "stalled"
    assert time.monotonic() - started < 150  # not gloo's 30 minutes


@pytest.mark.timeout(180)
def test_kind_4_a_rank_that_exits_0_early_is_named(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, "early_exit.py")
    assert done.returncode != 0
    line = hang_line(done.stderr)
    left = [p.read_text() for p in sorted((tmp_path / "run" / "progress").glob("rank-*.json"))]
    assert line.startswith("distrun: HANG (kind 4, gone): rank 1 has not entered collective #2 "
                           "(gloo:all_reduce"), (line, left, done.stderr[-4000:])
    assert "rank 1 exited after collective #1" in line
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["kind"] == "gone" and hang["culprits"] == [1]


@pytest.mark.timeout(180)
def test_healthy_plain_job_prints_the_proof_and_no_error(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, "healthy.py")
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("distrun: verify: ok: 2/2 ranks joined, each its own process (CPU), 2/2 "
            "processes busy") in done.stderr
    assert "ERROR" not in done.stderr and "HANG" not in done.stderr
    assert "WARNING" not in done.stderr
    progress = tmp_path / "run" / "progress"
    assert sorted(p.name for p in progress.iterdir()) == ["rank-0.json", "rank-1.json"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in progress.iterdir())


@pytest.mark.timeout(180)
def test_script_sees_what_it_would_without_distrun(tmp_path: Path, marker: str) -> None:
    """-m, argv, __main__, the user's own sitecustomize, exit status and traceback kept."""
    path = [str(JOBS / "usersite"), str(JOBS / "pkg"), os.environ.get("PYTHONPATH", "")]
    done = launch(tmp_path, marker, 2, "intact", "a", "--b", flags=("-m",),
                  env={"PYTHONPATH": os.pathsep.join(path)})
    assert done.returncode == 1, done.stderr[-3000:]
    log0 = (tmp_path / "run" / "logs" / "rank-0.log").read_text()
    assert "name=__main__ argv=['a', '--b'] spec=intact.__main__ custom=yes" in log0
    log1 = (tmp_path / "run" / "logs" / "rank-1.log").read_text()
    assert "ValueError: user error on rank 1" in log1
    assert 'intact/__main__.py", line 13, in <module>' in log1
    assert "distrun/instrument" not in log1
    assert (tmp_path / "run" / "progress" / "rank-1.json").exists()


@pytest.mark.timeout(180)
def test_no_instrument_turns_it_off(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, "healthy.py", flags=("--no-instrument",))
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list((tmp_path / "run").glob("progress/*"))
    assert "ranks joined, each" not in done.stderr


def start(tmp_path: Path, marker: str, script: str, *args: str,
          flags: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], Path]:
    """distrun launch in the background, its stderr to a file read while it runs."""
    err = tmp_path / "stderr.txt"
    argv = [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "2",
            "--run-dir", str(tmp_path / "run"), *flags, str(JOBS / script), *args]
    with open(tmp_path / "stdout.txt", "wb") as out, open(err, "wb") as errors:
        proc = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=errors,
                                env=cli_env({"DISTRUN_TEST_MARK": marker}))
    return proc, err


def wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], within: float) -> None:
    deadline = time.monotonic() + within
    while text not in path.read_text() and time.monotonic() < deadline:
        assert proc.poll() is None, path.read_text()[-3000:]
        time.sleep(0.2)
    assert text in path.read_text(), path.read_text()[-3000:]


@pytest.mark.timeout(180)
def test_ctrl_c_during_a_hang_ends_interrupted_with_that_hang_not_a_rank_gone(
        tmp_path: Path, marker: str) -> None:
    """The ranks that end because of the user's Ctrl-C are no evidence of a hang (the old
    final check named rank 1 'gone' and the hang 'resolved'): the end says the job was
    interrupted, with the hang in progress as it was named."""
    proc, err = start(tmp_path, marker, "sleeper.py", "1", "3600")
    try:
        wait_for(err, "distrun: HANG", proc, within=120)
        time.sleep(2)  # a watcher tick or two after the verdict, as a user would take
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 128 + signal.SIGINT
    finally:
        proc.kill()
    stderr = err.read_text()
    ours = [line for line in stderr.splitlines() if line.startswith("distrun: ")]
    named = ("HANG (kind 1, idle): rank 1 has not entered collective #4 (gloo:all_reduce "
             "[[1000]], process group 0) that rank 0 waits in for ")
    assert [line for line in ours if line.startswith("distrun: HANG")] == [hang_line(stderr)]
    assert hang_line(stderr).startswith(f"distrun: {named}"), ours
    assert "gone" not in stderr and "hang resolved" not in stderr, ours
    assert ours[-1].startswith(f"distrun: job interrupted: received SIGINT while a hang was in "
                               f"progress: {named}"), ours
    assert ours[-1].endswith(f"; run directory: {tmp_path / 'run'}"), ours
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert hang["kind"] == "idle" and hang["culprits"] == [1]
    assert [e["kind"] for e in events(tmp_path, "hang")] == ["idle"]
    assert not events(tmp_path, "hang_resolved")
    [finished] = events(tmp_path, "job_finished")
    assert finished["status"] == "interrupted" and named in finished["message"]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["exitcode"] == 130


@pytest.mark.timeout(180)
def test_a_stall_timeout_below_the_hang_floor_is_said_at_launch_and_in_the_stop(
        tmp_path: Path, marker: str) -> None:
    """--stall-timeout 5 cannot stop a collective hang before 10 s (a healthy rank's progress
    file can look stuck for about 6 s): said at launch, in --help and in the stop's reason."""
    started = time.monotonic()
    done = launch(tmp_path, marker, 2, "sleeper.py", "1", "3600", flags=("--stall-timeout", "5"))
    assert done.returncode == 124, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if line.startswith("distrun: ")]
    assert ours[0] == ("distrun: note: --stall-timeout 5: a hang inside torch.distributed (a "
                       "collective, a send or recv) is named, and the job stopped, after 10 s at "
                       "the earliest (the ranks' progress reaches distrun up to 6 s late: a "
                       "shorter wait could stop a healthy job); a ctx.step heartbeat stall, or "
                       "every rank idle outside torch.distributed, stops it after 5 s"), ours
    stop = next(line for line in ours if line.startswith("distrun: stopping the job"))
    assert re.fullmatch(r"distrun: stopping the job: no progress for 1[0-4] s \(--stall-timeout "
                        r"5; a hang inside torch.distributed is judged after 10 s at the "
                        r"earliest\)", stop), stop
    hang = json.loads((tmp_path / "run" / "hang.json").read_text())
    assert 10 <= hang["waited_s"] < 15
    assert time.monotonic() - started < 120
    helped = run_cli(["launch", "--help"], tmp_path, timeout=60)
    assert "a hang inside torch.distributed is stopped after 10 s at the earliest" in " ".join(
        helped.stdout.split())
    assert timeout_note(10.0) == timeout_note(None) == ""  # 10 s and more: honoured as given
