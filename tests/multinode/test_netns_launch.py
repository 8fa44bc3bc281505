"""Real ``distrun launch`` on two namespace "hosts": 2 nodes x 2 processes, gloo."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, cli_env
from tests.multinode.conftest import NetnsCluster

# 'marker' comes before 'netns_cluster' in every test: fixtures end in reverse order, so the
# namespaces are torn down (their processes killed) before the marker proves none is left.
pytestmark = [pytest.mark.slow, pytest.mark.netns]

WORKER = '''
import datetime, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.tensor([float(rank + 1)])
dist.all_reduce(x)
print(f"worker rank={rank} world={world} host={socket.gethostname()} sum={x.item():.0f}",
      flush=True)
dist.barrier()
dist.destroy_process_group()
'''


def launch_argv(run_dir: Path, *topology: str) -> list[str]:
    return [sys.executable, "-m", "distrun.cli.main", "launch", *topology,
            "--nproc-per-node", "2", "--master-wait", "60", "--run-dir", str(run_dir),
            "worker.py"]


def node_env(marker: str) -> dict[str, str]:
    return cli_env({"PYTHONPATH": str(REPO / "src"), "DISTRUN_TEST_MARK": marker,
                    "OMP_NUM_THREADS": "1"})


def workers_started(run_dir: Path) -> dict[str, dict[str, object]]:
    events = [json.loads(line) for line in
              (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    (started,) = [e for e in events if e["event"] == "workers_started"]
    assert started["world_size"] == 4
    ranks: dict[str, dict[str, object]] = started["ranks"]
    return ranks


def run_two_nodes(cluster: NetnsCluster, tmp_path: Path, marker: str,
                  topology: list[list[str]]) -> list[tuple[int, str, str]]:
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    procs = [cluster.start(i, launch_argv(tmp_path / f"run{i}", *topology[i]), node_env(marker),
                           tmp_path) for i in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=100)
        results.append((proc.returncode, out, err))
    return results


def dry_run(cluster: NetnsCluster, node: int, topology: list[str], marker: str,
            tmp_path: Path) -> dict[str, Any]:
    argv = launch_argv(tmp_path / "dry", *topology, "--dry-run", "--json")
    out, err = cluster.start(node, argv, node_env(marker), tmp_path).communicate(timeout=60)
    assert "Traceback" not in err, err
    shown: dict[str, Any] = json.loads(out)
    return shown


def assert_node_ran(run_dir: Path, node: int, ranks: set[int]) -> None:
    started = workers_started(run_dir)
    assert {int(r) for r in started} == ranks
    for rank in ranks:
        assert started[str(rank)]["host"] == f"n{node}"
        log = (run_dir / "logs" / f"rank-{rank}.log").read_text(encoding="utf-8")
        assert f"worker rank={rank} world=4 host=n{node} sum=10" in log


def test_static_two_by_two_ranks_per_node(marker: str, netns_cluster: NetnsCluster,
                                          tmp_path: Path) -> None:
    master = ["--nnodes", "2", "--master-addr", netns_cluster.addr(0), "--master-port", "29611"]
    results = run_two_nodes(netns_cluster, tmp_path, marker,
                            [[*master, "--node-rank", str(i)] for i in range(2)])
    for rc, _, err in results:
        assert rc == 0, err[-3000:]
    assert_node_ran(tmp_path / "run0", 0, {0, 1})
    assert_node_ran(tmp_path / "run1", 1, {2, 3})
    for i, (_, _, err) in enumerate(results):
        # Debian-style hosts: the hostname resolves to 127.0.1.1; distrun must say what it did
        assert f"hostname 'n{i}' resolves to 127.0.1.1 (loopback)" in err
        assert "all 2 nodes joined" in err
    plan = json.loads((tmp_path / "run1" / "plan.json").read_text(encoding="utf-8"))
    assert plan["env"]["GLOO_SOCKET_IFNAME"] == "eth0"
    for i in range(2):  # the fix is in the plan itself: dry run, plan.json and torchrun agree
        plan = json.loads((tmp_path / f"run{i}" / "plan.json").read_text(encoding="utf-8"))
        assert f"--local-addr {netns_cluster.addr(i)} " in plan["commands"][i]
        dry = dry_run(netns_cluster, i, [*master, "--node-rank", str(i)], marker, tmp_path)
        assert json.dumps(dry["commands"]) == json.dumps(plan["commands"])


def test_c10d_two_by_two(marker: str, netns_cluster: NetnsCluster, tmp_path: Path) -> None:
    rdzv = ["--nnodes", "2", "--rdzv-endpoint", f"{netns_cluster.addr(0)}:29612",
            "--rdzv-id", "netns-c10d"]
    results = run_two_nodes(netns_cluster, tmp_path, marker, [rdzv, rdzv])
    for rc, _, err in results:
        assert rc == 0, err[-3000:]
    on = [workers_started(tmp_path / f"run{i}") for i in range(2)]
    assert {int(r) for r in on[0]} | {int(r) for r in on[1]} == {0, 1, 2, 3}
    for i in range(2):  # c10d decides which node gets ranks 0-1; each node holds a pair
        ranks = sorted(int(r) for r in on[i])
        assert ranks in ([0, 1], [2, 3])
        assert_node_ran(tmp_path / f"run{i}", i, set(ranks))
        plan = json.loads((tmp_path / f"run{i}" / "plan.json").read_text(encoding="utf-8"))
        assert f"--rdzv-conf is_host={int(i == 0)} " in plan["commands"][0]
        assert json.dumps(dry_run(netns_cluster, i, rdzv, marker, tmp_path)["commands"]) == \
            json.dumps(plan["commands"])


def test_wrong_master_fails_fast_naming_address_and_port(marker: str,
                                                         netns_cluster: NetnsCluster,
                                                         tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    wrong = f"{netns_cluster.addr(0).rsplit('.', 1)[0]}.99"  # on the subnet, no such host
    argv = launch_argv(tmp_path / "run1", "--nnodes", "2", "--node-rank", "1",
                       "--master-addr", wrong, "--master-port", "29613")
    started = time.monotonic()
    proc = netns_cluster.start(1, argv, node_env(marker), tmp_path)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 3, err[-2000:]
    # the master probe gives up in ~6.5 s; torchrun alone waits 900 s. The bound leaves room
    # for a loaded 2-core CI machine without letting a rendezvous timeout pass.
    assert took < 60, f"took {took:.1f} s"
    assert f"cannot reach the master {wrong}:29613" in err
    assert "firewall" in err and "wrong address" in err
    assert not (tmp_path / "run1" / "events.jsonl").exists()  # no training process started
