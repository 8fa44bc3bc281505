"""Time to end a 4-rank gloo job whose rank 2 sleeps forever before a collective:
``distrun launch --stall-timeout 5`` against plain ``torchrun`` (capped, default 120 s:
torchrun would otherwise wait for gloo's 30-minute default collective timeout).

    PYTHONPATH=src python benchmarks/stall_detection.py [--cap 120]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "tests" / "process" / "jobs" / "hang.py"


def timed(argv: list[str], cap: float, cwd: str) -> tuple[float, int | None]:
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=env)
    try:
        code: int | None = proc.wait(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        code = None
    return time.monotonic() - start, code


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cap", type=float, default=120.0)
    p.add_argument("--stall-timeout", type=float, default=5.0)
    ns = p.parse_args()
    job = [str(JOB), "2", "3"]
    with tempfile.TemporaryDirectory() as tmp:
        ours, our_code = timed([sys.executable, "-m", "distrun.cli.main", "launch",
                                "--nproc-per-node", "4", "--stall-timeout",
                                str(ns.stall_timeout), "--run-dir", f"{tmp}/run", *job],
                               ns.cap, tmp)
        theirs, their_code = timed([sys.executable, "-m", "torch.distributed.run",
                                    "--standalone", "--nproc-per-node", "4", *job], ns.cap, tmp)
    capped = " (capped: still hanging)" if their_code is None else ""
    print(f"distrun launch --stall-timeout {ns.stall_timeout:g}: ended in {ours:.1f} s "
          f"(exit status {our_code})")
    print(f"torchrun: {theirs:.1f} s{capped} (exit status {their_code})")
    print(f"ratio torchrun / distrun: {theirs / ours:.1f}x"
          + (" (a lower bound)" if their_code is None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
