"""Start real worker processes for the runtime tests."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, cli_env

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
FAKES = HERE / "fakes"
SRC = REPO / "src"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake_path(tmp: Path, *extensions: str) -> str:
    """A folder holding only the named stand-in extensions (e.g. torch_npu)."""
    folder = tmp / "fakes"
    folder.mkdir(exist_ok=True)
    shutil.copy(FAKES / "fake_vendor.py", folder)
    for ext in extensions:
        shutil.copytree(FAKES / ext, folder / ext, dirs_exist_ok=True)
    return str(folder)


def worker_env(mark: str, extra: dict[str, str] | None = None, path: str = "") -> dict[str, str]:
    env = cli_env({"DISTRUN_TEST_MARK": mark, "PYTHONPATH": f"{SRC}{':' + path if path else ''}"})
    env.update(extra or {})
    return env


def start(out: Path, env: dict[str, str], mark: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WORKER), str(out), mark], cwd=out, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_ranks(out: Path, envs: list[dict[str, str]], mark: str, timeout: float = 60
              ) -> list[tuple[int, str, str]]:
    """Start one worker per env at once; (exit status, stdout, stderr) of each."""
    procs = [start(out, env, mark) for env in envs]
    results = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            results.append((proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def result(out: Path, rank: int) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / f"rank-{rank}.json").read_text())
    return data


def calls(log: Path) -> list[list[object]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
