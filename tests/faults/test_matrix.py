"""The fault matrix (issue 11): each fault run for real (2 ranks, gloo), asserting the five
things a user sees: exit status, time to exit, processes left (the ``marker`` fixture: none),
complete rank logs (line counts), and the verdict (summary.json status and first failure).

Faults covered here: wrong first failure, disk full (succeeded and failed job), lost log
lines (a flood; the 1,000,000-line run is tests/faults/test_logs.py), exit-time abort, and
bracketed user/log text. Covered where they already assert all five, not run twice:
launcher SIGKILLed (test_launcher_killed.py), exit-time abort with its own lines
(test_exit_teardown.py); two launches in one second and an existing run directory
(tests/unit/test_rundir.py, no ranks start); nodes disagreeing on nproc
(tests/process/test_nodesync_cli.py, refused before any rank starts)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
HERE = Path(__file__).parent
MAX_S = 150.0  # generous: the test machine is shared
DISK_WARNING = "distrun: warning: cannot write the run directory"


@dataclass(frozen=True)
class Fault:
    script: str
    exitcode: int
    status: str
    first_failure: int | None = None
    lines: dict[int, tuple[str, int]] = field(default_factory=dict)  # rank: (needle, count)
    env: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    run_name: str = "run"
    small_disk: bool = False
    shown: tuple[str, ...] = ()  # text the console must show


FAULTS = {
    "first-failure": Fault(
        "scripts_first_fail.py", 1, "failed", first_failure=1,
        lines={0: (" out rank 0 step ", 2), 1: (" out rank 1 step ", 2)},
        run_name="[exp1]/a[/]b",  # default settings: torchelastic reports the failed rank
        shown=("rank 1 first", "shape [/] mismatch", "[exp1]", "a[/]b")),
    "bracketed-run-dir": Fault(
        "scripts_ok.py", 0, "succeeded", run_name="[exp1]/a[/]b",
        lines={0: (" out rank 0 line ", 20), 1: (" out rank 1 line ", 20)},
        shown=("job succeeded", "[exp1]/a[/]b")),
    "flood": Fault(
        "scripts_flood.py", 0, "succeeded", env={"FLOOD_LINES": "100000"},
        lines={0: (" out rank 0 line ", 100_000), 1: (" out rank 1 line ", 100_000)}),
    "exit-abort": Fault(
        "scripts_no_teardown.py", 0, "succeeded",
        lines={0: (" out rank 0 sum 2", 1), 1: (" out rank 1 sum 2", 1)}),
    "disk-full-succeeds": Fault(
        "scripts_disk_full.py", 0, "succeeded", small_disk=True,
        lines={0: (" out rank 0 before ", 5), 1: (" out rank 1 before ", 5)},
        shown=(DISK_WARNING,)),
    "disk-full-rank-fails": Fault(
        "scripts_disk_full.py", 3, "failed", env={"DISTRUN_TEST_FAIL": "1"}, small_disk=True,
        lines={0: (" out rank 0 before ", 5), 1: (" out rank 1 before ", 5)},
        shown=(DISK_WARNING,)),
}


@pytest.fixture
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """Where the run directory goes: tmp_path, or a 512 KiB tmpfs for a disk-full fault."""
    fault = FAULTS[request.node.callspec.params["name"]]
    if not fault.small_disk:
        yield tmp_path
        return
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault(name: str, place: Path, tmp_path: Path, marker: str) -> None:
    fault = FAULTS[name]
    run = place / "runs" / fault.run_name
    started = time.monotonic()
    done = run_cli(["launch", "--nproc-per-node", "2", *fault.flags, "--run-dir", str(run),
                    str(HERE / fault.script)], tmp_path, timeout=MAX_S + 30,
                   env={"DISTRUN_TEST_MARK": marker, **fault.env})
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == fault.exitcode, out[-3000:]
    assert took < MAX_S, f"{name}: took {took:.0f} s"
    own = "\n".join(line for line in out.splitlines() if "[rank" not in line)
    assert "MarkupError" not in out and "Traceback" not in own, out[-3000:]
    assert "terminate called" not in out
    for text in fault.shown:
        assert text in out, f"{text!r} not shown:\n{out[-3000:]}"
    if fault.small_disk:
        assert out.count(DISK_WARNING) == 1, out[-3000:]
        assert "SIGKILL" not in out  # no rank was killed (a failed rank's peer gets SIGTERM)
        assert fault.exitcode or "SIGTERM" not in out
    for rank, (needle, count) in fault.lines.items():
        with open(run / "logs" / f"rank-{rank}.log", "rb") as log:
            found = sum(1 for line in log if needle.encode() in line)
        assert found == count, f"rank {rank}: {found} of {count} lines with {needle!r}"
    summary_file = run / "summary.json"
    if fault.small_disk and not summary_file.exists():
        return  # the disk was full: the console line (checked above) is the verdict
    summary = json.loads(summary_file.read_text())
    assert summary["status"] == fault.status and summary["exitcode"] == fault.exitcode
    assert summary["first_failure"] == fault.first_failure
    assert summary["logs_complete"] is True
