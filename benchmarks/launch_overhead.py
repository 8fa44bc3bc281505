"""distrun launch against torchrun --standalone on the same tiny gloo script.

Alternating runs, median of N each (default 7), printed as a ratio (target: <= 1.05,
preflight included). Usage: python benchmarks/launch_overhead.py [--runs N]
"""

from __future__ import annotations

import argparse
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


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


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
    a, b = statistics.median(t_distrun), statistics.median(t_torchrun)
    print(f"torchrun --standalone: median {b:.2f} s over {runs} runs")
    print(f"distrun launch:        median {a:.2f} s over {runs} runs")
    print(f"ratio distrun/torchrun: {a / b:.3f} (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
