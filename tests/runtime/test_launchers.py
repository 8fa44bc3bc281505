"""distrun.init() under each launcher this machine can run, with real processes (gloo, CPU)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.helpers import WORKER, free_port, result, run_ranks, worker_env

pytestmark = pytest.mark.slow


def check_two_ranks(out: Path, environment: str) -> None:
    """What the user's script sees on each of 2 ranks: its place, one all_reduce, the save."""
    for rank in (0, 1):
        r = result(out, rank)
        assert (r["rank"], r["local_rank"], r["world_size"], r["node_rank"]) == (rank, rank, 2, 0)
        assert (r["environment"], r["device"], r["backend"]) == (environment, "cpu", "gloo")
        assert (r["device_class"], r["device_type"]) == ("torch.device", "cpu")
        assert r["sum"] == 3.0 and r["ckpt_seen"] is True and r["is_main"] == (rank == 0)
        assert r["cuda_calls"] == [] and r["warnings"] == []


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=90,
                          check=False)


def test_distrun_launch_with_heartbeats(tmp_path: Path, marker: str) -> None:
    run_dir = tmp_path / "run"
    env = worker_env(marker, {"WORKER_RECORD_CUDA": "1"})
    proc = run([sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "2",
                "--run-dir", str(run_dir), str(WORKER), str(tmp_path), marker], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    check_two_ranks(tmp_path, "torchelastic")
    assert "main says hello from rank 0" in proc.stdout
    assert "main says hello from rank 1" not in (run_dir / "logs" / "rank-1.log").read_text()
    # ctx.logger on rank 1 goes to its stderr, which launch keeps as its own log
    assert "[rank 1] INFO rank 1 done" in (run_dir / "logs" / "rank-1.log").read_text()
    for rank in (0, 1):
        stamp, step = (run_dir / "heartbeats" / f"rank-{rank}").read_text().split()
        assert step == "3" and float(stamp) > 0
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    joined = sorted(e["rank"] for e in events if e["event"] == "rank_joined")
    progress = {e["rank"]: e for e in events if e["event"] == "progress"}  # each rank's last
    assert joined == [0, 1] and sorted(progress) == [0, 1]
    # the last step's metrics are recorded, even within the once-a-second throttle
    assert progress[0]["step"] == 3 and progress[0]["metrics"] == {"loss": 1.0 / 3}


def test_torchrun(tmp_path: Path, marker: str) -> None:
    env = worker_env(marker, {"WORKER_RECORD_CUDA": "1"})
    proc = run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
                str(WORKER), str(tmp_path), marker], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    check_two_ranks(tmp_path, "torchelastic")
    # without distrun launch, rank 1's logger writes its own file
    assert "[rank 1] INFO rank 1 done" in (tmp_path / "distrun-logs" / "rank-1.log").read_text()


def test_plain_python_with_manual_variables(tmp_path: Path, marker: str) -> None:
    port = str(free_port())
    envs = [worker_env(marker, {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                "WORKER_RECORD_CUDA": "1"}) for r in (0, 1)]
    for code, _, err in run_ranks(tmp_path, envs, marker):
        assert code == 0, err
    check_two_ranks(tmp_path, "manual")


def test_mpirun(tmp_path: Path, marker: str) -> None:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun not found: install Debian's openmpi-bin (apt-get install openmpi-bin)")
    env = worker_env(marker, {"MASTER_PORT": str(free_port()), "WORKER_RECORD_CUDA": "1"})
    passed = ["-x", "PYTHONPATH", "-x", "MASTER_PORT", "-x", "DISTRUN_TEST_MARK",
              "-x", "WORKER_RECORD_CUDA"]
    proc = run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", *passed,
                sys.executable, str(WORKER), str(tmp_path), marker], env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_two_ranks(tmp_path, "mpi")


def test_jax_two_cpu_processes(tmp_path: Path, marker: str) -> None:
    pytest.importorskip("jax", reason="jax is in requirements-test.txt")
    port = str(free_port())
    envs = [worker_env(marker, {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                "WORKER_FRAMEWORK": "jax", "JAX_PLATFORMS": "cpu"})
            for r in (0, 1)]
    for code, _, err in run_ranks(tmp_path, envs, marker, timeout=90):
        assert code == 0, err
    for rank in (0, 1):
        r = result(tmp_path, rank)
        assert (r["rank"], r["world_size"], r["backend"], r["environment"]) == (
            rank, 2, "jax", "manual")
        assert (r["process_count"], r["process_index"], r["sum"]) == (2, rank, 3.0)
        # the host-local device, not the job-wide id (process 1's first CPU device is id 2048)
        assert (r["device"], r["ckpt_seen"]) == ("cpu:0", True)
        assert str(r["device_class"]).startswith("jax") and "Device" in str(r["device_class"])


DDP_ALWAYS = """\
import torch, distrun
from torch.nn.parallel import DistributedDataParallel
ctx = distrun.init()
model = DistributedDataParallel(torch.nn.Linear(2, 1).to(ctx.device))  # no world-size check
model(torch.ones(1, 2)).sum().backward()
print(f"ddp ok world={ctx.world_size} backend={ctx.backend} env={ctx.environment}", flush=True)
distrun.shutdown()
"""


def test_one_process_under_a_launcher_gets_a_process_group(tmp_path: Path, marker: str) -> None:
    """As under `torchrun --nproc-per-node 1`: a script that always wraps DDP runs with one
    process (it failed with 'Default process group has not been initialized')."""
    script = tmp_path / "ddp.py"
    script.write_text(DDP_ALWAYS)
    env = worker_env(marker)
    proc = run([sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "1",
                "--run-dir", str(tmp_path / "run"), str(script), marker], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ddp ok world=1 backend=gloo env=torchelastic" in proc.stdout
    assert "Default process group has not been initialized" not in proc.stderr
    by_hand = run([sys.executable, str(script), marker],
                  {**env, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}, tmp_path)
    assert by_hand.returncode == 0, by_hand.stderr
    assert "ddp ok world=1 backend=gloo env=manual" in by_hand.stdout
