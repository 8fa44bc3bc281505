"""The run directory is written safely: no write through a planted link, 0700/0600, one
directory per launch, an existing run refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from distrun.launch.rundir import default_path
from distrun.model import rundir
from distrun.model.record import epoch
from distrun.model.rundir import RunDir, RunDirError
from distrun.runtime.heartbeat import Heartbeat
from tests.conftest import run_cli

JOBS = Path(__file__).parent.parent / "process" / "jobs"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_folders_are_0700_and_files_0600(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "runs" / "r")
    run.event("launch_started", pid=1)
    run.write_json("plan.json", {"world_size": 1})
    with run.append("logs/rank-0.log") as log:
        log.write("hello\n")
    hb = Heartbeat(str(run.path), 0)
    hb.beat(1, {"loss": 1.0})
    hb.close()
    run.close()
    assert mode(run.path) == 0o700 and mode(run.logs) == 0o700
    assert mode(run.path / "heartbeats") == 0o700
    for name in ("events.jsonl", "plan.json", "logs/rank-0.log", "heartbeats/rank-0"):
        assert mode(run.path / name) == 0o600, name
    names = [json.loads(x)["event"] for x in (run.path / "events.jsonl").read_text().splitlines()]
    assert names == ["launch_started", "progress"]


FORK = ("import os\npid = os.fork()\nif pid == 0:\n    sys.exit(0)\n"  # the child's exit: no line
        "os.waitpid(pid, 0)\n")


@pytest.mark.parametrize("ending", ["hb.close()\n", "", FORK], ids=["close", "exit", "fork"])
def test_the_last_beat_the_throttle_held_back_is_written_at_close_or_exit(
        tmp_path: Path, ending: str) -> None:
    """Five beats within a second: the first is written at once, the last at close (or, with
    no close, when the interpreter exits), stamped with its own time; none in between."""
    code = ("import sys\nfrom distrun.runtime.heartbeat import Heartbeat\n"
            "hb = Heartbeat(sys.argv[1], 0)\n"
            "for s in range(1, 6):\n    hb.beat(s, {'loss': 1.0 / s})\n" + ending)
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60)
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [(e["step"], e["metrics"]) for e in lines] == [(1, {"loss": 1.0}), (5, {"loss": 0.2})]
    beat = float((tmp_path / "heartbeats" / "rank-0").read_text().split()[0])
    assert abs((epoch(lines[1]["time"]) or 0.0) - beat) < 0.002  # the last beat's time, not exit's


@pytest.mark.parametrize("planted", ["events.jsonl", "logs/rank-0.log", ".plan.json.tmp",
                                     "heartbeats/rank-0", "logs"])
def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_path: Path,
                                                                planted: str) -> None:
    target = tmp_path / "victim"
    target.write_text("precious\n")
    run = tmp_path / "run"
    (run / "heartbeats").mkdir(parents=True)
    if planted != "logs":
        (run / "logs").mkdir()
    link = run / planted
    link.symlink_to(target)
    if planted == ".plan.json.tmp":  # any temporary name the writer could pick
        for pid in range(os.getpid() - 2, os.getpid() + 3):
            (run / f".plan.json.{pid}.tmp").symlink_to(target)
    with pytest.raises(RunDirError, match="symbolic link") as err:
        r = RunDir(run)
        r.write_json("plan.json", {"x": 1})
        r.append("logs/rank-0.log").write("x\n")
        Heartbeat(str(run), 0)
    assert str(link) in str(err.value) or ".plan.json." in str(err.value)
    assert target.read_text() == "precious\n"
    assert not (run / "plan.json").is_symlink()


def test_two_launches_in_the_same_second_get_two_directories(tmp_path: Path) -> None:
    path = default_path("train", root=str(tmp_path / "runs"))
    made: list[Path] = []
    barrier = threading.Barrier(8)

    def make() -> None:
        barrier.wait()
        made.append(rundir.create(path, chosen=False))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8
    assert sorted(p.name for p in made) == sorted(
        [path.name, *(f"{path.name}-{n}" for n in range(2, 9))])


def test_chosen_run_dir_empty_is_used_non_empty_or_link_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    assert rundir.create(empty, chosen=True) == empty and mode(empty) == 0o700
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "events.jsonl").write_text("")
    with pytest.raises(RunDirError, match=r"is not empty.*choose a new folder"):
        rundir.create(busy, chosen=True)
    (tmp_path / "link").symlink_to(empty)
    with pytest.raises(RunDirError, match="is a symbolic link: choose a new folder"):
        rundir.create(tmp_path / "link", chosen=True)
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirError, match="not a folder"):
        rundir.create(tmp_path / "file", chosen=True)


@pytest.mark.slow
def test_launch_into_an_existing_run_is_refused_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").write_text('{"event": "launch_started"}\n')
    done = run_cli(["launch", "--nproc-per-node", "1", "--run-dir", str(run),
                    str(JOBS / "steady.py")], cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        f"distrun launch: error: --run-dir {run} is not empty (it may hold another run): "
        "choose a new folder")
    assert (run / "events.jsonl").read_text() == '{"event": "launch_started"}\n'


def test_a_run_whose_launcher_died_shows_as_ended_abnormally(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run = RunDir.create(tmp_path / "run")
    run.event("launch_started", pid=dead.pid, node_rank=0, world_size=1)
    run.event("workers_started", attempt=0, world_size=1, ranks={"0": {"local_rank": 0}})
    run.close()
    done = run_cli(["monitor", str(run.path), "--json"], cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ended-abnormally"
    run_cli(["report", str(run.path)], cwd=tmp_path, timeout=60)
    assert "status <b>ended-abnormally</b>" in (run.path / "report.html").read_text()
    elsewhere = RunDir.create(tmp_path / "elsewhere")  # a launcher on another host: not judged
    elsewhere.event("launch_started", pid=dead.pid, host="node-b.invalid", node_rank=1)
    elsewhere.event("workers_started", attempt=0, world_size=1, ranks={"0": {"local_rank": 0}})
    elsewhere.close()
    done = run_cli(["monitor", str(elsewhere.path), "--json"], cwd=tmp_path, timeout=60)
    assert json.loads(done.stdout)["status"] == "running"


def test_report_refuses_to_write_through_a_link_in_one_line(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    run.event("launch_started", pid=os.getpid())
    run.close()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (run.path / "report.html").symlink_to(victim)
    done = run_cli(["report", str(run.path)], cwd=tmp_path, timeout=60)
    assert done.returncode == 0 and victim.read_text() == "precious\n"
    assert not (run.path / "report.html").is_symlink()
