"""``distrun export slurm --submit`` against a real Slurm: the job runs every rank."""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.slurm.conftest import SlurmCluster

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

WORKER = '''\
import datetime, os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
line = f"[rank] {rank}/{world} node={os.environ.get('SLURMD_NODENAME')} sum={total.item():.0f} "
line += f"args={sys.argv[1:]!r}\\n"
os.write(1, line.encode())
dist.barrier()
dist.destroy_process_group()
'''


ARGS = ["--tag", "a b", "it's", "$HOME", "*"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def job_env(cluster: SlurmCluster, marker: str) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return cluster.client_env({"PATH": f"{venv_bin}:{os.environ['PATH']}",
                               "DISTRUN_TEST_MARK": marker, "OMP_NUM_THREADS": "1"})


@pytest.mark.timeout(180)
def test_exported_sbatch_job_runs_every_rank(slurm_cluster: SlurmCluster, marker: str,
                                             tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    logs = tmp_path / "logs of 'this' job"  # quoting of #SBATCH values and of the job's argv
    logs.mkdir()
    script = tmp_path / "job.sbatch"
    done = run_cli(["export", "slurm", "--inventory", "2x2xcpu", "--nproc-per-node", "2",
                    "--master-port", str(free_port()), "--job-name", "distrun-slurm-test",
                    "--time", "5", "--partition", "debug",
                    # a command of several words (once quoted as one: exit 127 "not found")
                    "--torchrun", "python -m torch.distributed.run",
                    "--sbatch-output", str(logs / "%x-%j.out"),
                    "--sbatch-error", str(logs / "%x-%j.err"),
                    "--output", str(script), "--submit", str(worker), *ARGS],
                   cwd=tmp_path, env=job_env(slurm_cluster, marker), timeout=60)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert job_id.isdigit(), done.stdout
    assert f"submitted batch job {job_id}" in done.stderr
    assert "#SBATCH --nodes=2\n" in script.read_text()
    assert "  python -m torch.distributed.run --nnodes 2 " in script.read_text()

    info = slurm_cluster.wait_job(job_id, timeout=120)
    out = logs / f"distrun-slurm-test-{job_id}.out"
    err = logs / f"distrun-slurm-test-{job_id}.err"
    text = out.read_text() if out.exists() else ""
    errors = err.read_text()[-3000:] if err.exists() else ""
    assert info.get("JobState") == "COMPLETED", (info, text, errors, slurm_cluster.log_tail())
    assert info.get("ExitCode") == "0:0"
    reports = re.findall(r"^\[rank\] (\d+)/4 node=(tb\d) sum=10 args=(.*)$", text, re.MULTILINE)
    assert sorted(int(r) for r, _, _ in reports) == [0, 1, 2, 3], text
    assert {node for _, node, _ in reports} == {"tb0", "tb1"}, text
    assert {args for _, _, args in reports} == {repr(ARGS)}, text


@pytest.mark.timeout(60)
def test_submit_reports_what_sbatch_refused(slurm_cluster: SlurmCluster, marker: str,
                                            tmp_path: Path) -> None:
    done = run_cli(["export", "slurm", "--inventory", "2x2xcpu", "--partition", "nosuchpart",
                    "--submit", "train.py"], cwd=tmp_path, env=job_env(slurm_cluster, marker),
                   timeout=60)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "sbatch refused the script" in done.stderr
    assert "invalid partition" in done.stderr.lower(), done.stderr
    assert slurm_cluster.run("squeue", "-h").stdout.strip() == ""
