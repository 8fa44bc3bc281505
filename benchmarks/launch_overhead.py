"""distrun launch against torchrun --standalone on the same tiny gloo script.

Alternating runs, median of N each (default 7), printed as a ratio (target: <= 1.05,
preflight included). Also the CPU time of the whole process tree (launcher and ranks), which a
busy shared machine disturbs much less than the wall time.
Usage: python benchmarks/launch_overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
dist.destroy_process_group()
"""


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "tiny.py").write_text(SCRIPT)
        torchrun = [str(bindir / "torchrun"), "--standalone", "--nproc-per-node", "2", "tiny.py"]
        distrun = [str(bindir / "distrun"), "launch", "--nproc-per-node", "2", "tiny.py"]
        timed(torchrun, work)  # warm the page cache for both
        timed(distrun, work)
        t_torchrun, t_distrun = [], []
        for _ in range(runs):
            t_torchrun.append(timed(torchrun, work))
            t_distrun.append(timed(distrun, work))
    a, b = (statistics.median(t[0] for t in ts) for ts in (t_distrun, t_torchrun))
    ca, cb = (statistics.median(t[1] for t in ts) for ts in (t_distrun, t_torchrun))
    print(f"torchrun --standalone: median {b:.2f} s ({cb:.2f} s CPU) over {runs} runs")
    print(f"distrun launch:        median {a:.2f} s ({ca:.2f} s CPU) over {runs} runs")
    print(f"ratio distrun/torchrun: {a / b:.3f} wall, {ca / cb:.3f} CPU (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
