"""`distrun diagnose` on the real output of torch's deprecated launcher.

`python -m torch.distributed.launch` passes `--local-rank=N` to every worker and prints a
FutureWarning on every run telling scripts to read `os.environ['LOCAL_RANK']`. A script whose
own argparse does not know `--local-rank` exits 2 with argparse's usage error, and torchelastic
then prints its ChildFailedError summary. The user must be shown the usage error (no rule
names it: "no known cause" with that line), not the summary as "only consequences", and a
healthy run under this launcher must not read as a failure because of the warning.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.diagnose import diagnose
from tests.conftest import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

STRICT_ARGS = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr')\np.parse_args()\n"
READS_ENV = "import os\nprint('local rank', os.environ['LOCAL_RANK'])\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(tmp_path: Path, marker: str, script: str) -> tuple[int, Path]:
    job = tmp_path / "job.py"
    job.write_text(script, "utf-8")
    log = tmp_path / "train.log"
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "torch.distributed.launch", "--nproc_per_node", "2",
             "--master_port", str(free_port()), str(job), marker],
            env=cli_env({"DISTRUN_TEST_MARK": marker}), cwd=tmp_path,
            stdout=out, stderr=subprocess.STDOUT, timeout=90, check=False)
    return done.returncode, log


def test_argparse_refusing_local_rank_is_shown_not_the_summary(tmp_path: Path, marker: str) -> None:
    code, log = launch(tmp_path, marker, STRICT_ARGS)
    text = log.read_text("utf-8")
    assert code != 0 and "ChildFailedError" in text  # torchelastic's summary is there
    result = diagnose([log])
    assert result.causes == ()
    lines = [u.text for u in result.unrecognised]
    assert lines and "error: unrecognized arguments: --local-rank=" in lines[0]


def test_a_healthy_run_under_the_deprecated_launcher_is_clean(tmp_path: Path, marker: str) -> None:
    code, log = launch(tmp_path, marker, READS_ENV)
    text = log.read_text("utf-8")
    assert code == 0 and "os.environ['LOCAL_RANK']" in text  # the FutureWarning was printed
    result = diagnose([log])
    assert result.causes == () and result.unrecognised == ()
