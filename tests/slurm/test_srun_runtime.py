"""Real Slurm, no ``distrun export``: ``srun`` straight into ``distrun.init()`` (issue 3) and
``srun distrun launch`` inside an ``sbatch`` allocation with no topology flags (issue 4).

Both nodes (tb0, tb1) are this host at NodeAddr 127.0.0.1 and their names do not resolve, so
these also prove distrun finds the master through ``scontrol show node`` (NodeAddr).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env
from tests.slurm.conftest import SlurmCluster

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

JOB = '''\
import os
import torch
import torch.distributed as dist
import distrun

ctx = distrun.init(timeout_s=60)
total = torch.tensor([float(ctx.rank + 1)])
dist.all_reduce(total)
line = (f"[rank] {ctx.rank}/{ctx.world_size} local={ctx.local_rank} node={ctx.node_rank} "
        f"env={ctx.environment} host={os.environ.get('SLURMD_NODENAME')} "
        f"sum={total.item():.0f}\\n")
os.write(1, line.encode())
distrun.shutdown()
'''

REPORT = re.compile(r"\[rank\] (\d+)/(\d+) local=(\d+) node=(\d+) env=(\w+) host=(tb\d) "
                    r"sum=(\d+)$", re.MULTILINE)


def task_env(cluster: SlurmCluster, marker: str) -> dict[str, str]:
    """What srun/sbatch pass on to the tasks: the venv on PATH, distrun importable, the mark."""
    venv_bin = str(Path(sys.executable).parent)
    return cli_env(cluster.client_env({"PATH": f"{venv_bin}:{os.environ['PATH']}",
                                       "DISTRUN_TEST_MARK": marker, "OMP_NUM_THREADS": "1"}))


def reports(text: str) -> dict[int, tuple[int, int, int, str, str, int]]:
    """rank -> (world, local rank, node rank, environment, Slurm node, all_reduce sum)."""
    return {int(r): (int(w), int(loc), int(n), e, host, int(s))
            for r, w, loc, n, e, host, s in REPORT.findall(text)}


@pytest.mark.timeout(60)
def test_srun_tasks_join_through_distrun_init(slurm_cluster: SlurmCluster, marker: str,
                                              tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    done = subprocess.run(["srun", "-N2", "--ntasks-per-node=2", "--time=2",
                           "--kill-on-bad-exit=1", sys.executable, str(job), marker],
                          cwd=tmp_path, env=task_env(slurm_cluster, marker), capture_output=True,
                          text=True, timeout=45, check=False)
    assert done.returncode == 0, (done.stdout, done.stderr[-3000:], slurm_cluster.log_tail())
    seen = reports(done.stdout)
    assert sorted(seen) == [0, 1, 2, 3], done.stdout
    # srun -N2 --ntasks-per-node=2 places tasks in blocks: 0,1 on the first node, 2,3 on the next
    assert {r: v[:5] for r, v in seen.items()} == {
        0: (4, 0, 0, "slurm", "tb0"), 1: (4, 1, 0, "slurm", "tb0"),
        2: (4, 0, 1, "slurm", "tb1"), 3: (4, 1, 1, "slurm", "tb1")}, done.stdout
    assert {v[5] for v in seen.values()} == {1 + 2 + 3 + 4}


def batch_script(tmp_path: Path, runs: Path) -> str:
    """Records the batch script's own SLURM_STEP_* variables, then one distrun launch per node."""
    distrun = Path(sys.executable).parent / "distrun"
    per_node = (f"exec {shlex.quote(str(distrun))} launch --nproc-per-node 2 --master-wait 30 "
                f'--run-dir {shlex.quote(str(runs))}/"$SLURMD_NODENAME" job.py')
    return "\n".join([
        "#!/bin/bash",
        "#SBATCH --nodes=2 --ntasks-per-node=1 --time=2",
        f"#SBATCH --output={tmp_path}/slurm-%j.out --error={tmp_path}/slurm-%j.err",
        f"#SBATCH --chdir={tmp_path}",
        "env | grep '^SLURM_STEP' > batch-step-vars.txt",
        f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(per_node)}",
        ""])


def workers_started(run_dir: Path) -> dict[str, dict[str, object]]:
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    started = [e for e in events if e.get("event") == "workers_started"]
    assert len(started) == 1, events
    ranks: dict[str, dict[str, object]] = started[0]["ranks"]
    return ranks


@pytest.mark.timeout(90)
def test_srun_distrun_launch_takes_topology_from_the_allocation(
        slurm_cluster: SlurmCluster, marker: str, tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    runs = tmp_path / "runs"
    script = tmp_path / "job.sbatch"
    script.write_text(batch_script(tmp_path, runs))
    sub = subprocess.run(["sbatch", "--parsable", str(script)], cwd=tmp_path,
                         env=task_env(slurm_cluster, marker), capture_output=True, text=True,
                         timeout=30, check=False)
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip().split(";")[0]

    info = slurm_cluster.wait_job(job_id, timeout=60)
    out = (tmp_path / f"slurm-{job_id}.out").read_text()
    err = (tmp_path / f"slurm-{job_id}.err").read_text()
    assert info.get("JobState") == "COMPLETED", (info, out, err[-3000:], slurm_cluster.log_tail())
    assert info.get("ExitCode") == "0:0"
    # distrun's allocation reader relies on this: the batch script itself is in no srun step
    assert (tmp_path / "batch-step-vars.txt").read_text() == ""
    logs = ""
    for node_rank, node in enumerate(("tb0", "tb1")):
        assert f"Slurm job {job_id}: node {node_rank} of 2 (tb0,tb1), master 127.0.0.1:" in err
        ranks = workers_started(runs / node)
        assert {int(r): (v["local_rank"], v["node_rank"]) for r, v in ranks.items()} == {
            2 * node_rank: (0, node_rank), 2 * node_rank + 1: (1, node_rank)}, ranks
        logs += "".join(f.read_text() for f in sorted((runs / node / "logs").glob("rank-*.log")))
    assert "[rank] 0/4" in out  # rank 0 echoes to the job's output, every rank to its log
    seen = reports(logs)
    assert sorted(seen) == [0, 1, 2, 3], (logs, err[-3000:])
    assert {r: v[:5] for r, v in seen.items()} == {
        0: (4, 0, 0, "torchelastic", "tb0"), 1: (4, 1, 0, "torchelastic", "tb0"),
        2: (4, 0, 1, "torchelastic", "tb1"), 3: (4, 1, 1, "torchelastic", "tb1")}, logs
    assert {v[5] for v in seen.values()} == {10}
