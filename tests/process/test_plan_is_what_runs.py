"""The plan is what runs: ``launch --dry-run --json``, the run directory's ``plan.json`` and
the namespace torch's ``config_from_args`` receives name the same torchrun command."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distrun.launch.torchrun import finish, parser
from tests.conftest import cli_env, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
RECORDER = Path(__file__).parent / "scripts" / "record_config.py"
WORKER = "import sys\nprint('worker ran', sys.argv[1:], flush=True)\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(tmp_path: Path, marker: str, name: str, args: list[str]) -> subprocess.Popen[str]:
    env = cli_env({"DISTRUN_TEST_MARK": marker, "RECORD_CONFIG_TO": str(tmp_path / f"{name}.ns")})
    argv = [sys.executable, str(RECORDER), "launch", "--run-dir", str(tmp_path / name), *args]
    return subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def torchrun_reading(command: str) -> dict[str, Any]:
    """What torchrun makes of a plan's command line (parser, then its run() steps)."""
    argv = shlex.split(command)
    assert argv[0] == "torchrun", command  # CPU nodes: no visible-devices prefix
    ns = finish(parser().parse_args(argv[1:]))
    return dict(json.loads(json.dumps(vars(ns), default=str)))


def check_node(tmp_path: Path, name: str, node_rank: int, args: list[str]) -> None:
    dry = run_cli(["launch", "--dry-run", "--json", *args], tmp_path)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads((tmp_path / name / "plan.json").read_text(encoding="utf-8"))
    shown = json.loads(dry.stdout)
    assert json.dumps(shown["commands"]) == json.dumps(planned["commands"])  # byte for byte
    assert shown["nodes"] == planned["nodes"]
    received = json.loads((tmp_path / f"{name}.ns").read_text(encoding="utf-8"))
    expected = torchrun_reading(planned["commands"][node_rank])
    if "--standalone" in planned["commands"][node_rank]:  # torchrun's own fresh id, each run
        assert received.pop("rdzv_id") != "none" and expected.pop("rdzv_id") != "none"
    assert received == expected
    log = (tmp_path / name / "logs" / f"rank-{node_rank}.log").read_text(encoding="utf-8")
    assert "worker ran" in log


def run_nodes(tmp_path: Path, marker: str, nodes: dict[str, list[str]]) -> None:
    (tmp_path / "t.py").write_text(WORKER, encoding="utf-8")
    procs = {name: start(tmp_path, marker, name, args) for name, args in nodes.items()}
    for name, proc in procs.items():
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"{name}: {err}"
    for k, (name, args) in enumerate(nodes.items()):
        check_node(tmp_path, name, k if len(nodes) > 1 else 0, args)


def test_single_node(tmp_path: Path, marker: str) -> None:
    run_nodes(tmp_path, marker, {"one": ["--nproc-per-node", "1", "--max-restarts", "1",
                                         "t.py", "--lr", "0.1 x"]})


def test_c10d_endpoint(tmp_path: Path, marker: str) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    run_nodes(tmp_path, marker, {"c10d": ["--nnodes", "1", "--rdzv-endpoint", endpoint,
                                          "--rdzv-id", "job7", "--rdzv-conf", "timeout=60",
                                          "--nproc-per-node", "1", "t.py"]})


def test_two_nodes_static(tmp_path: Path, marker: str) -> None:
    port = str(free_port())
    common = ["--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", port,
              "--master-wait", "60", "--nproc-per-node", "1"]
    run_nodes(tmp_path, marker, {f"node{k}": [*common, "--node-rank", str(k), "t.py"]
                                 for k in range(2)})
