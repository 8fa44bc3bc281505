"""Fault: the disk under the run directory fills while the job runs. distrun's own records
(events, heartbeats, progress, rank logs, launcher.log, summary.json) degrade with one warning;
no rank is killed and the exit status is the job's own."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
SCRIPT = Path(__file__).parent / "scripts_disk_full.py"
WARNING = "distrun: warning: cannot write the run directory"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize(("fail", "status"), [("0", 0), ("1", 3)])
def test_a_full_disk_never_changes_the_job_exit_status(small_disk: Path, tmp_path: Path,
                                                       marker: str, fail: str,
                                                       status: int) -> None:
    run = small_disk / "run"
    started = time.monotonic()
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run), str(SCRIPT)],
                   tmp_path, timeout=240, env={"DISTRUN_TEST_MARK": marker,
                                               "DISTRUN_TEST_FAIL": fail})
    assert time.monotonic() - started < 240
    out = done.stdout + done.stderr
    assert done.returncode == status, out[-3000:]
    assert out.count(WARNING) == 1, out[-3000:]
    assert "Traceback" not in _launcher_lines(out), out[-3000:]
    assert "SIGKILL" not in out and "SIGTERM" not in out
    for rank in (0, 1):  # written before the disk filled: kept
        log = (run / "logs" / f"rank-{rank}.log").read_text()
        assert log.count(f" out rank {rank} before ") == 5


def _launcher_lines(out: str) -> str:
    """The launcher's own lines (a rank's traceback would be prefixed [rankN])."""
    return "\n".join(line for line in out.splitlines() if not line.startswith("[rank"))
