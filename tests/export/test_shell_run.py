"""The exported per-node shell scripts, run for real: two "nodes" on this host, 2 ranks each."""

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

WORKER = '''\
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
os.write(1, f"[rank] {dist.get_rank()}/{dist.get_world_size()} sum={total.item():.0f} "
            f"args={sys.argv[1:]!r}\\n".encode())
dist.destroy_process_group()
'''
ARGS = ["--name", "run one", "it's"]


def no_dns(tmp_path: Path, argv: list[str]) -> list[str]:
    """As root: run argv with an /etc/resolv.conf naming no DNS server (torch's store
    reverse-resolves its peers; this keeps those look-ups on the machine)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return argv
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("options timeout:1 attempts:1\n")
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(resolv), *argv]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_node_scripts_run_a_2x2_job(tmp_path: Path, marker: str) -> None:
    (tmp_path / "worker.py").write_text(WORKER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torchrun = str(Path(sys.executable).parent / "torchrun")
    done = run_cli(["export", "shell", "--inventory", "2x2xcpu", "--nproc-per-node", "2",
                    "--master-addr", "127.0.0.1", "--master-port", str(port),
                    "--torchrun", torchrun, "--output", str(tmp_path / "nodes"),
                    str(tmp_path / "worker.py"), *ARGS], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    env = cli_env({"DISTRUN_TEST_MARK": marker, "OMP_NUM_THREADS": "1"})
    procs = [subprocess.Popen(no_dns(tmp_path, [str(tmp_path / "nodes" / f"node-{k}.sh")]),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (0, 1)]
    outs = [p.communicate(timeout=90) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    reports = [re.findall(r"^\[rank\] (\d)/4 sum=10 args=(.*)$", out, re.M) for out, _ in outs]
    assert sorted(int(r) for r, _ in reports[0]) == [0, 1]
    assert sorted(int(r) for r, _ in reports[1]) == [2, 3]
    assert {a for node in reports for _, a in node} == {repr(ARGS)}


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("torchrun", ["python -m torch.distributed.run", "distrun launch"])
def test_torchrun_is_a_command_not_one_word(tmp_path: Path, marker: str, torchrun: str) -> None:
    """``--torchrun "python -m torch.distributed.run"`` once became one quoted word (exit 127)."""
    (tmp_path / "worker.py").write_text(WORKER)
    done = run_cli(["export", "shell", "--inventory", "1x2xcpu", "--nproc-per-node", "2",
                    "--torchrun", torchrun, "--output", str(tmp_path / "nodes"),
                    str(tmp_path / "worker.py"), *ARGS], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = (tmp_path / "nodes" / "node-0.sh").read_text()
    assert f"exec {torchrun} --standalone" in script  # the words, each quoted on its own
    bindir = str(Path(sys.executable).parent)  # python, distrun: the venv's
    env = cli_env({"DISTRUN_TEST_MARK": marker, "OMP_NUM_THREADS": "1",
                   "PATH": bindir + os.pathsep + os.environ.get("PATH", "")})
    run = subprocess.run(["bash", str(tmp_path / "nodes" / "node-0.sh")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    ranks = re.findall(r"^\[rank\] (\d)/2 sum=3 args=(.*)$", run.stdout, re.M)
    # distrun launch shows rank 0 on the console (the others are in the run's logs); "/2
    # sum=3" is the all-reduce over both ranks either way.
    expected = [0] if torchrun.startswith("distrun") else [0, 1]
    assert sorted(int(r) for r, _ in ranks) == expected, run.stdout[-2000:]
    assert {a for _, a in ranks} == {repr(ARGS)}
