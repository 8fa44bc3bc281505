"""Real processes: distrun launch over torchrun with gloo ranks on this host."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_env, processes_with, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
JOB = Path(__file__).parent / "scripts" / "job.py"


def launch(tmp_path: Path, marker: str, nproc: int, **env: str) -> subprocess.CompletedProcess[str]:
    args = ["launch", "--nproc-per-node", str(nproc), "--run-dir", str(tmp_path / "run"),
            str(JOB), marker]
    return run_cli(args, tmp_path, env={"DISTRUN_TEST_MARK": marker, **env})


def rank_log(tmp_path: Path, rank: int) -> str:
    return (tmp_path / "run" / "logs" / f"rank-{rank}.log").read_text()


def events(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("nproc", [2, 4])
def test_job_succeeds_with_every_rank_logged(tmp_path: Path, marker: str, nproc: int) -> None:
    done = launch(tmp_path, marker, nproc)
    assert done.returncode == 0, done.stderr
    for rank in range(nproc):
        log = rank_log(tmp_path, rank)
        assert f"out rank {rank} line 2 sum {nproc}" in log
        assert f"err rank {rank} stderr line" in log
        assert f"rank {rank} done" in log
    assert "rank 0 line 0" in done.stdout and "rank 1 line 0" not in done.stdout
    # each stream to its own console, as torchrun and the script alone would
    assert "rank 0 stderr line" in done.stderr and "stderr line" not in done.stdout
    started = next(e for e in events(tmp_path) if e["event"] == "workers_started")
    assert sorted(started["ranks"]) == [str(r) for r in range(nproc)]  # type: ignore[arg-type]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["world_size"] == nproc
    assert "job succeeded" in done.stderr
    assert not [e for e in events(tmp_path) if e["event"] == "orphans_ended"]  # not its guardian


def test_json_stdout_is_the_summary_alone(tmp_path: Path, marker: str) -> None:
    args = ["launch", "--json", "--nproc-per-node", "2", "--run-dir", str(tmp_path / "run"),
            str(JOB), marker]
    done = run_cli(args, tmp_path, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"  # the ranks' output is not in it
    assert "rank 0 line 0" in done.stderr and "rank 0 stderr line" in done.stderr


def test_rank_that_raises(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, JOB_FAIL_RANK="1")
    assert done.returncode == 1
    assert "rank 1 first" in done.stderr and "RuntimeError: boom on rank 1" in done.stderr
    assert "RuntimeError: boom on rank 1" in rank_log(tmp_path, 1)
    assert "rank 0 line 2" in rank_log(tmp_path, 0)
    exited = {e["rank"]: e for e in events(tmp_path) if e["event"] == "rank_exited"}
    assert exited[1]["role"] == "first failure" and exited[1]["exitcode"] == 1
    assert exited.get(0, {"role": "stopped or failed after"})["role"] != "first failure"
    assert "Traceback" not in done.stderr.split("its log:")[0]
    verdict = done.stderr.split("distrun diagnose:")[1]  # printed last; an unknown error is no guess
    assert "No known cause" in verdict and "rank 1" in verdict and "boom on rank 1" in verdict


def test_rank_killed_by_sigkill(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, JOB_KILL_RANK="0")
    assert done.returncode == 128 + signal.SIGKILL
    assert "killed by SIGKILL" in done.stderr
    assert "rank 0 line 2" in rank_log(tmp_path, 0)
    exited = next(e for e in events(tmp_path) if e["event"] == "rank_exited" and e["rank"] == 0)
    assert exited["signal"] == "SIGKILL" and exited["role"] == "first failure"
    verdict = done.stderr.split("distrun diagnose:")[1]
    assert "[host-oom-or-killed]" in verdict and "where: rank 0" in verdict


def test_failed_ranks_child_is_not_left_behind(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, 2, JOB_FAIL_RANK="1", JOB_CHILD_RANK="1")
    assert done.returncode == 1
    assert "started child" in rank_log(tmp_path, 1)
    ended = next(e for e in events(tmp_path) if e["event"] == "orphans_ended")
    assert any(marker in " ".join(p["cmdline"]) for p in ended["processes"])  # type: ignore[attr-defined]
    assert not any("distrun.launch.guardian" in p["cmdline"] for p in ended["processes"])  # type: ignore[attr-defined]
    assert processes_with(marker) == []


@pytest.mark.skipif(shutil.which("torchrun") is None and not Path(sys.executable).with_name(
    "torchrun").exists(), reason="torchrun not installed")
def test_plain_torchrun_leaves_that_child_running(tmp_path: Path, marker: str) -> None:
    """The behaviour distrun fixes: torchrun leaves a failed rank's child, re-parented."""
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    with open(tmp_path / "torchrun.out", "w") as out:  # a pipe would stay open: the child has it
        done = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", str(JOB), marker],
                              env=cli_env({"DISTRUN_TEST_MARK": marker, "JOB_FAIL_RANK": "1",
                                           "JOB_CHILD_RANK": "1"}),
                              stdout=out, stderr=subprocess.STDOUT, timeout=90, check=False)
    assert done.returncode == 1
    left = processes_with(marker)
    assert left and all(p.ppid() != 0 for p in left)  # alive after torchrun ended
    for proc in left:
        proc.kill()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_every_rank(tmp_path: Path, marker: str, sig: signal.Signals
                                            ) -> None:
    args = [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "2",
            "--run-dir", str(tmp_path / "run"), str(JOB), marker]
    proc = subprocess.Popen(args, cwd=tmp_path, env=cli_env({"DISTRUN_TEST_MARK": marker,
                                                             "JOB_HANG": "1"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = [tmp_path / "run" / "logs" / f"rank-{r}.log" for r in (0, 1)]
        if all(p.exists() and "ready" in p.read_text() for p in logs):
            break
        time.sleep(0.2)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "interrupted" in err
    for rank in (0, 1):
        assert f"rank {rank} ready" in rank_log(tmp_path, rank)
    finished = [e for e in events(tmp_path) if e["event"] == "job_finished"]
    assert finished and finished[0]["status"] == "interrupted"


def test_port_conflict_forced_past_preflight_is_diagnosed(tmp_path: Path, marker: str) -> None:
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        refused = run_cli(["launch", "--nnodes", "1", "--master-port", str(port), str(JOB), marker],
                          tmp_path, env={"DISTRUN_TEST_MARK": marker})
        assert refused.returncode == 3 and f"master port {port} is already in use" in refused.stderr
        done = run_cli(["launch", "--force", "--master-port", str(port), "--run-dir",
                        str(tmp_path / "run"), str(JOB), marker], tmp_path,
                       env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode != 0
    assert "[address-in-use]" in done.stderr.split("distrun diagnose:")[1]


def test_torchruns_folders_and_files_are_private_and_the_users_are_not_touched(
        tmp_path: Path, marker: str) -> None:
    """torchelastic makes <run>/torchrun/... with the umask (0755/0644), and a rank writes its
    error.json there: every folder under the run directory ends 0700, every file 0600; the
    training script's own files keep the user's umask."""
    script = Path(__file__).parent / "scripts" / "private_job.py"
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(tmp_path / "run"),
                    str(script), marker], tmp_path, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 1, done.stderr[-3000:]
    run = tmp_path / "run"
    raw = sorted(p.relative_to(run / "torchrun").parts[1:]  # <run id>/attempt_0/<rank>/<file>
                 for p in (run / "torchrun").glob("*/*/*/*"))
    assert raw == [("attempt_0", str(r), f) for r in (0, 1)
                   for f in ("error.json", "stderr.log", "stdout.log")], raw
    modes = {p.relative_to(run).as_posix(): stat.S_IMODE(os.lstat(p).st_mode)
             for p in [run, *run.rglob("*")]}
    assert {p: m for p, m in modes.items()
            if m != (0o700 if (run / p).is_dir() else 0o600)} == {}
    umask = os.umask(0)
    os.umask(umask)
    for rank in (0, 1):
        assert stat.S_IMODE((tmp_path / f"user-file-{rank}.txt").stat().st_mode) == 0o666 & ~umask
        assert stat.S_IMODE((tmp_path / f"user-folder-{rank}").stat().st_mode) == 0o777 & ~umask


def test_a_link_a_rank_plants_in_the_logs_keeps_the_jobs_exit_status(tmp_path: Path,
                                                                     marker: str) -> None:
    script = tmp_path / "plant.py"
    script.write_text("import os, sys\n"
                      "run = os.environ['DISTRUN_RUN_DIR']\n"
                      "os.symlink('/etc/hostname', os.path.join(run, 'logs', 'planted.log'))\n"
                      "sys.exit(3)\n")
    done = run_cli(["launch", "--nproc-per-node", "1", "--run-dir", str(tmp_path / "run"),
                    str(script), marker], tmp_path, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 3, done.stderr  # the job's own status, not distrun's
    assert "Traceback" not in done.stderr
    assert "distrun diagnose: not done: " in done.stderr
    assert "planted.log is a symbolic link, not a regular file" in done.stderr
    assert processes_with(marker) == []
