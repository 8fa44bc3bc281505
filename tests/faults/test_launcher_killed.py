"""Fault: `kill -9` of `distrun launch` while ranks train. Nothing of the job survives it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import cli_env, processes_with

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
SCRIPT = Path(__file__).parent / "scripts_family.py"


def wait_for_families(run: Path, deadline: float) -> list[int]:
    pids: list[int] = []
    while time.monotonic() < deadline and len(pids) < 6:
        pids = []
        for rank in (0, 1):
            log = run / "logs" / f"rank-{rank}.log"
            found = re.search(r"family ready rank \d+ (\d+) (\d+) (\d+)",
                              log.read_text() if log.exists() else "")
            pids += [int(p) for p in found.groups()] if found else []
        time.sleep(0.2)
    return pids


def test_sigkilled_launcher_leaves_no_process_and_the_run_says_so(tmp_path: Path,
                                                                  marker: str) -> None:
    run = tmp_path / "run"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "2",
         "--run-dir", str(run), str(SCRIPT)], cwd=tmp_path,
        env=cli_env({"DISTRUN_TEST_MARK": marker}), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    family = wait_for_families(run, time.monotonic() + 90)
    assert len(family) == 6, "the ranks never reported their children"
    ranks = [p for p in psutil.Process(launcher.pid).children() if "scripts_family" in
             " ".join(p.cmdline())]
    assert len(ranks) == 2
    launcher.send_signal(signal.SIGKILL)
    assert launcher.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < 15 and processes_with(marker):
        time.sleep(0.2)
    took = time.monotonic() - killed_at
    left = processes_with(marker)
    assert left == [], f"left after {took:.1f} s: {[p.cmdline() for p in left]}"
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                   for p in [*family, *(r.pid for r in ranks)])
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    finished = [e for e in events if e["event"] == "job_finished"]
    assert finished and finished[-1]["status"] == "ended-abnormally"
    assert json.loads((run / "summary.json").read_text())["status"] == "ended-abnormally"
