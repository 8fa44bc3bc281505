"""Two real ``distrun launch`` nodes on loopback that disagree: both refuse, naming both values."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node(tmp_path: Path, marker: str, rank: int, nproc: int, port: int, *,
         token: str) -> subprocess.Popen[str]:
    script = tmp_path / "t.py"
    script.write_text(f"print({marker!r})\n")
    args = ["launch", "--nnodes", "2", "--node-rank", str(rank), "--master-addr", "127.0.0.1",
            "--master-port", str(port), "--nproc-per-node", str(nproc), "--master-wait", "30",
            "--run-dir", str(tmp_path / f"run{rank}"), str(script)]
    return subprocess.Popen([sys.executable, "-m", "distrun.cli.main", *args], cwd=tmp_path,
                            env=cli_env({"DISTRUN_TEST_MARK": marker, **token_env(token)}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def token_env(token: str) -> dict[str, str]:
    return {"DISTRUN_JOB_TOKEN": token} if token else {}


def test_nodes_with_different_nproc_refuse_to_start(tmp_path: Path, marker: str) -> None:
    port = free_port()
    token = "t0k3n-" + marker
    nodes = [node(tmp_path, marker, 0, 1, port, token=token), node(tmp_path, marker, 1, 2, port, token=token)]
    outs = [p.communicate(timeout=90) for p in nodes]
    for p, (out, err) in zip(nodes, outs, strict=True):
        assert p.returncode == 3, err
        assert "(node 0) plans 1 process(es) per node" in err and "(node 1) plans 2" in err
        assert "Traceback" not in err and marker not in out  # nothing was started
        assert "unauthenticated" not in err
    assert not (tmp_path / "run0").exists() and not (tmp_path / "run1").exists()


def test_a_node_with_another_token_is_refused(tmp_path: Path, marker: str) -> None:
    port = free_port()
    master = node(tmp_path, marker, 0, 1, port, token="a" * 32)
    other = node(tmp_path, marker, 1, 1, port, token="b" * 32)
    _, err = other.communicate(timeout=90)
    assert other.returncode == 3 and "signed with another DISTRUN_JOB_TOKEN" in err
    master.kill()
    master.communicate(timeout=30)
