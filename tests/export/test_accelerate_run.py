"""The accelerate export run by ``accelerate launch`` for real: a 2-process CPU plan starts 2
processes (through mpirun, accelerate's only multi-process CPU path), not one."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli

RANK = '''\
from accelerate import Accelerator
acc = Accelerator()
print(f"[acc] {acc.process_index}/{acc.num_processes} {acc.distributed_type.value}", flush=True)
'''


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_accelerate_launch_starts_the_planned_cpu_processes(tmp_path: Path, marker: str) -> None:
    pytest.importorskip("accelerate")
    if shutil.which("mpirun") is None:
        pytest.skip("no mpirun here: accelerate starts several CPU processes only through it")
    (tmp_path / "rank.py").write_text(RANK)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    plan = ["--inventory", "1x2xcpu", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
            "--master-port", port]
    hosts = run_cli(["export", "deepspeed", *plan, "--output", "hostfile", "rank.py"],
                    cwd=tmp_path)
    assert hosts.returncode == 0, hosts.stderr
    done = run_cli(["export", "accelerate", *plan, "--mpirun-hostfile",
                    str(tmp_path / "hostfile"), "--output", "acc.yaml", "rank.py"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"main_process_port: {port}" in (tmp_path / "acc.yaml").read_text()
    extra = {"DISTRUN_TEST_MARK": marker, "OMP_NUM_THREADS": "1"}
    if os.geteuid() == 0:  # Open MPI refuses root unless told
        extra |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    accelerate = str(Path(sys.executable).parent / "accelerate")
    run = subprocess.run([accelerate, "launch", "--config_file", "acc.yaml", "rank.py"],
                         cwd=tmp_path, env=cli_env(extra), capture_output=True, text=True,
                         timeout=150, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    # mpirun forwards the two ranks' output as it comes: one line may hold both
    seen = re.findall(r"\[acc\] (\d)/(\d) ([A-Z_]+)", run.stdout)
    assert sorted(seen) == [("0", "2", "MULTI_CPU"), ("1", "2", "MULTI_CPU")], run.stdout
