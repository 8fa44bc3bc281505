"""A rank's last progress write must not show a collective it returned from as in flight.
gloo records completion on its worker thread just after the caller's wait() returns, and with
two worker threads an older number can be recorded after a newer one and stay: a rank that left
at once was read as waiting in its last collective, and the final look named it as a waiter and
the rank really waiting as the culprit. Real processes, gloo, torchrun."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env

pytestmark = [pytest.mark.slow]
JOB = Path(__file__).parent / "jobs" / "last_read.py"


@pytest.mark.timeout(180)
def test_the_exit_read_never_shows_a_returned_collective_in_flight(
        tmp_path: Path, marker: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(JOB)], cwd=tmp_path, env=cli_env({"DISTRUN_TEST_MARK": marker}),
        capture_output=True, text=True, timeout=150, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = re.findall(r"rank (\d) plain_busy=(\d+) last_busy=(\d+)", done.stdout)
    assert sorted(r for r, _, _ in counts) == ["0", "1"], done.stdout
    print("plain reads showing a returned collective in flight:", [b for _, b, _ in counts])
    assert [n for _, _, n in counts] == ["0", "0"], done.stdout
