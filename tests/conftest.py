"""Shared helpers: run the real CLI as a subprocess and prove no process is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "DISTRUN_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMI"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["PYTHONUNBUFFERED"] = "1"
    if env.get("PYTHONPATH"):  # tests run in other folders: a relative entry would miss
        entries = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in entries if p)
    env.update(extra or {})
    return env


def run_cli(args: list[str], cwd: Path, timeout: float = 90, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distrun.cli.main", *args], cwd=cwd,
                          env=cli_env(env), capture_output=True, text=True, timeout=timeout,
                          check=False)


def processes_with(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            env = proc.info["environ"] or {}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if proc.pid != os.getpid() and (marker in cmd or env.get("DISTRUN_TEST_MARK") == marker):
            found.append(proc)
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique mark put in every process a test starts; after the test none may remain."""
    mark = f"dtm-{uuid.uuid4().hex[:12]}"
    yield mark
    deadline = time.monotonic() + 5
    while processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_with(mark)
    for proc in left:
        proc.kill()
    assert not left, f"processes left behind: {[(p.pid, p.name()) for p in left]}"
