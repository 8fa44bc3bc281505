"""distrun's monitoring end to end: real gloo jobs through `distrun launch`, the watcher's
verification and stall verdict, `distrun monitor --json` / `--metrics-port`, and the HTML
report rendered by headless Chromium."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.accelerators.sessions import NVML, open_session
from distrun.launch.rundir import RunDir
from distrun.model.plan import Request
from distrun.monitor.devices import NvmlSampler
from distrun.monitor.state import epoch
from distrun.monitor.watcher import LauncherActions, WatchConfig, Watcher
from distrun.plan.planner import build
from tests.conftest import cli_env, processes_with, run_cli
from tests.unit.test_monitor_samplers import fake_nvml

JOBS = Path(__file__).parent / "jobs"
pytestmark = pytest.mark.slow


def events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A healthy 2-rank gloo job of about 5 s, run once for several tests."""
    run = tmp_path_factory.mktemp("healthy") / "run"
    mark = "dtm-monitor-healthy"
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run),
                    str(JOBS / "steady.py")], cwd=run.parent, timeout=120,
                   env={"DISTRUN_TEST_MARK": mark})
    assert done.returncode == 0, done.stderr[-2000:]
    assert not processes_with(mark), "processes left behind by the healthy job"
    return run, done.stderr


def test_healthy_job_is_verified_within_seconds(healthy: tuple[Path, str]) -> None:
    run, stderr = healthy
    # joined: from the process group (distrun.instrument), after a short CPU-use window
    assert "distrun: verify: ok: 2/2 ranks joined, each its own process (CPU)" in stderr
    assert "verify: WARNING" not in stderr and "verify: ERROR" not in stderr
    evs = events(run)
    joined = max(epoch(e["time"]) or 0 for e in evs if e["event"] == "rank_joined")
    verified = next(epoch(e["time"]) or 0 for e in evs if e["event"] == "verified")
    assert 0 <= verified - joined < 6.0


def test_stalled_rank_is_named_and_the_job_ends_within_timeout_plus_10s(
        tmp_path: Path, marker: str) -> None:
    run = tmp_path / "run"
    started = time.monotonic()
    done = run_cli(["launch", "--nproc-per-node", "4", "--stall-timeout", "5",
                    "--run-dir", str(run), str(JOBS / "hang.py"), "2", "3"],
                   cwd=tmp_path, timeout=90, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 124, done.stderr[-2000:]
    stalled_line = next(x for x in done.stderr.splitlines() if "distrun: STALLED:" in x)
    assert stalled_line.startswith("distrun: STALLED: rank 2 (node 0, local rank 2) stalled")
    assert "last step 3" in stalled_line and "ranks 0, 1, 3 wait for it" in stalled_line
    evs = events(run)
    culprit = next(e for e in evs if e["event"] == "stalled" and e["culprit"])
    assert culprit["rank"] == 2 and culprit["stack"]
    last_beat = (epoch(culprit["time"]) or 0) - culprit["heartbeat_age_s"]
    finished = next(epoch(e["time"]) or 0 for e in evs if e["event"] == "job_finished")
    assert finished - last_beat < 5 + 10
    assert time.monotonic() - started < 60


def test_two_ranks_on_one_device_is_an_error_naming_both(tmp_path: Path, marker: str) -> None:
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(tmp_path / "run"),
                    str(JOBS / "shared_device.py")], cwd=tmp_path, timeout=60,
                   env={"DISTRUN_TEST_MARK": marker})
    assert ("distrun: verify: ERROR: rank 0 (node 0, local rank 0) and rank 1 (node 0, local "
            "rank 1) are both bound to cuda:0") in done.stderr


H100 = {"name": "NVIDIA H100 80GB HBM3", "used": 0, "total": 81559 * 2**20, "util": 0,
        "pids": []}


def test_one_process_on_a_declared_8_device_node_warns_7_idle(tmp_path: Path,
                                                                marker: str) -> None:
    plan = build(Request(script="train.py", nproc_per_node="1"),
                 parse_declared("1x8xH100-80GB"))
    run = RunDir(tmp_path / "run")
    run.write_json("plan.json", plan.model_dump())
    run.event("launch_started", pid=os.getpid(), node_rank=0, world_size=1)
    code = ("import os,sys,time\nfrom distrun.runtime.heartbeat import Heartbeat\n"
            "hb = Heartbeat(sys.argv[1], 0)\nhb.joined('cuda:0', 0, 0)\n"
            "for s in range(200):\n    hb.beat(s, {})\n    time.sleep(0.05)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(run.path)],
                             env=cli_env({"DISTRUN_TEST_MARK": marker}))
    run.event("workers_started", attempt=0, world_size=1,
              ranks={"0": {"local_rank": 0, "node_rank": 0, "host": socket.gethostname()}})
    boards = [{**H100, "util": 97, "used": 40 * 2**30, "pids": [child.pid]},
              *[dict(H100) for _ in range(7)]]
    out = io.StringIO()
    watcher = Watcher(run, plan, WatchConfig(interval_s=0.2, settle_s=0.5),
                      LauncherActions(run, out),
                      sampler=NvmlSampler(open_session(NVML, lambda name: fake_nvml(boards))))
    watcher.start()
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not any(c.id == "idle-devices"
                                                      for c in watcher.checks):
            time.sleep(0.1)
    finally:
        watcher.stop()
        child.kill()
        child.wait()
        run.close()
    assert ("distrun: verify: WARNING: 7 of 8 cuda devices on node 0 are idle: no rank uses "
            "device(s) 1, 2, 3, 4, 5, 6, 7; 1 process(es) for 8 devices (start one per "
            "device: --nproc-per-node 8)") in out.getvalue()
    assert "device 0" not in out.getvalue()


def test_monitor_json_snapshot_of_a_finished_run(healthy: tuple[Path, str]) -> None:
    run, _ = healthy
    done = run_cli(["monitor", str(run), "--json"], cwd=run.parent, timeout=30)
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    assert snap["status"] == "succeeded" and snap["world_size"] == 2
    assert [r["rank"] for r in snap["ranks"]] == [0, 1]
    for r in snap["ranks"]:
        assert r["device"] == "cpu" and r["step"] > 0 and r["loss"] is not None
        assert r["status"] == "exited 0" and r["heartbeat_age_s"] < 5  # not "running"
        assert r["steps_per_second"] is not None and r["steps_per_second"] > 0  # one read


def test_monitor_and_report_show_the_last_steps_loss(tmp_path: Path, marker: str) -> None:
    """40 steps within a second: progress is written at most once a second, so before the
    last step's metrics landed at exit, the view showed step 40 next to step 1's loss."""
    run = tmp_path / "run"
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run),
                    str(JOBS / "quick.py")], cwd=tmp_path, timeout=120,
                   env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 0, done.stderr[-2000:]
    shown = run_cli(["monitor", str(run), "--json"], cwd=tmp_path, timeout=30)
    ranks = json.loads(shown.stdout)["ranks"]
    assert [(r["step"], r["loss"]) for r in ranks] == [(40, 1 / 40), (40, 1 / 40 + 0.01)]
    table = run_cli(["monitor", str(run), "--once"], cwd=tmp_path, timeout=30,
                    env={"COLUMNS": "120"}).stdout
    head = next(x for x in table.splitlines() if "loss" in x).split("┃")
    column = [c.strip() for c in head].index("loss")
    cells = [x.split("│")[column].strip() for x in table.splitlines() if "exited 0" in x]
    assert cells == ["0.025", "0.035"], table
    assert run_cli(["report", str(run), "-o", "r.html"], cwd=tmp_path, timeout=30).returncode == 0
    page = (tmp_path / "r.html").read_text()
    rows = page[page.index('<table id="ranks"'):page.index("</table>")]
    assert "<td>40</td>" in rows and "<td>0.025</td>" in rows and "<td>0.035</td>" in rows
    progress = [e for e in events(run) if e["event"] == "progress"]
    assert len(progress) <= 6  # still at most about one a second per rank, plus the last


def test_monitor_of_a_missing_run_dir_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli(["monitor", str(tmp_path / "nope")], cwd=tmp_path, timeout=30)
    assert done.returncode == 2 and "is not a distrun run directory" in done.stderr
    assert "Traceback" not in done.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_endpoint_serves_units_in_names(healthy: tuple[Path, str], marker: str) -> None:
    pytest.importorskip("prometheus_client", reason="prometheus-client not installed")
    run, _ = healthy
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "distrun.cli.main", "monitor", str(run),
                             "--metrics-port", str(port), "--interval", "0.5"],
                            env=cli_env({"DISTRUN_TEST_MARK": marker}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        body = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not body:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
            except OSError:
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert 'distrun_rank_step{node="0",rank="0"}' in body
    assert 'distrun_rank_heartbeat_age_seconds{node="0",rank="1"}' in body
    assert "distrun_rank_resident_memory_bytes" in body
    assert 'distrun_rank_stalled{node="0",rank="0"} 0.0' in body


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium not installed")
def test_report_renders_in_headless_chromium(healthy: tuple[Path, str], tmp_path: Path) -> None:
    run, _ = healthy
    page = tmp_path / "report.html"
    done = run_cli(["report", str(run), "-o", str(page)], cwd=tmp_path, timeout=30)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.as_uri()], capture_output=True, text=True, timeout=60, check=False).stdout
    for chart in ("loss", "throughput", "utilisation", "events"):
        assert f'<svg id="{chart}"' in dom, chart
    assert dom.count('class="series"') >= 6  # loss, throughput and CPU use for 2 ranks
    table = dom[dom.index('<table id="ranks"'):dom.index("</table>")]
    assert table.count("<tr") == 3 and "<td>0</td>" in table and "<td>1</td>" in table
