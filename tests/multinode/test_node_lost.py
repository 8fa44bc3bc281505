"""A node whose link is cut mid-job is named on the survivor, which stops within the timeout."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.multinode.conftest import NetnsCluster, ns_name
from tests.multinode.test_netns_launch import launch_argv, node_env

pytestmark = [pytest.mark.slow, pytest.mark.netns]

STEPPER = '''
import time
import torch
import torch.distributed as dist
import distrun

with distrun.init() as ctx:
    for step in range(1, 1001):
        t = torch.ones(1)
        dist.all_reduce(t)
        ctx.step(step)
        time.sleep(0.2)
'''
STALL_TIMEOUT = 5


def steps(run_dir: Path, ranks: range) -> list[int]:
    out = []
    for rank in ranks:
        try:
            out.append(int((run_dir / "heartbeats" / f"rank-{rank}").read_text().split()[1]))
        except (OSError, IndexError, ValueError):
            out.append(-1)
    return out


def events(run_dir: Path, name: str) -> list[dict[str, object]]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def wait_stepping(tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if min(steps(tmp_path / "run0", range(2)) + steps(tmp_path / "run1", range(2, 4))) >= 3:
            return
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"a node ended before stepping: {proc.communicate()[1][-3000:]}")
        time.sleep(0.3)
    pytest.fail("the 2x2 job did not reach step 3 on both nodes within 90 s")


def test_cut_node_is_named_on_the_survivor(marker: str, netns_cluster: NetnsCluster,
                                           tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(STEPPER, encoding="utf-8")
    master = ["--nnodes", "2", "--master-addr", netns_cluster.addr(0), "--master-port", "29614",
              "--stall-timeout", str(STALL_TIMEOUT)]
    procs = [netns_cluster.start(i, launch_argv(tmp_path / f"run{i}", *master, "--node-rank",
                                                str(i)), node_env(marker), tmp_path)
             for i in range(2)]
    wait_stepping(tmp_path, procs)
    time.sleep(1.5)  # a few node heartbeats through the store
    cut = time.monotonic()
    subprocess.run(["ip", "link", "set", f"{ns_name(1)}-h", "down"], check=True, timeout=10)
    _, err = procs[0].communicate(timeout=STALL_TIMEOUT + 30)
    took = time.monotonic() - cut
    assert procs[0].returncode == 124, err[-3000:]
    assert took < STALL_TIMEOUT + 10, f"node 0 ended {took:.1f} s after the cut"
    assert "distrun: NODE LOST: node 1 (n1, ranks 2-3) last heard" in err
    assert "ranks 0-1 on this node cannot go on without it; stopping the job" in err
    assert "STALLED:" not in err  # the lost node is the verdict, not the waiting ranks
    (lost,) = events(tmp_path / "run0", "node_lost")
    assert (lost["node_rank"], lost["host"], lost["ranks"]) == (1, "n1", [2, 3])
    assert STALL_TIMEOUT < float(str(lost["last_heard_s"])) < STALL_TIMEOUT + 3
    summary = json.loads((tmp_path / "run0" / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "stalled"
    # the cut-off node cannot reach the store node 0 serves: it names node 0 the same way
    deadline = time.monotonic() + 10
    while not events(tmp_path / "run1", "node_lost") and time.monotonic() < deadline:
        time.sleep(0.3)
    (other,) = events(tmp_path / "run1", "node_lost")
    assert (other["node_rank"], other["host"], other["ranks"], other["reason"]) == (
        0, "n0", [0, 1], "store")
