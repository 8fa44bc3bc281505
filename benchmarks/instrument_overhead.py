"""The cost of instrumenting every rank (distrun.instrument), against ``--no-instrument`` on the
same job, measured in the same run: per collective (a loop of tiny all_reduces), per training
step (a matmul and a 4 MB gradient all_reduce), and the wall time of the whole launch.

    PYTHONPATH=src python benchmarks/instrument_overhead.py [--ranks 2] [--repeats 3]

Runs ``distrun launch`` alternately with and without instrumentation (gloo, this host) and
prints the medians and their ratios. Goals: <= 1.02 per tiny collective, <= 1.01 per step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = '''
import json, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
small, n = torch.ones(1), int(__import__("sys").argv[1])
for _ in range(200):
    dist.all_reduce(small)
t0 = time.perf_counter()
for _ in range(n):
    dist.all_reduce(small)
per_collective_us = (time.perf_counter() - t0) / n * 1e6
a, grad = torch.randn(384, 384), torch.randn(1 << 20)
steps = int(__import__("sys").argv[2])
t0 = time.perf_counter()
for _ in range(steps):
    for _ in range(8):
        a = torch.tanh(a @ a)
    dist.all_reduce(grad)
per_step_ms = (time.perf_counter() - t0) / steps * 1e3
if dist.get_rank() == 0:
    print("BENCH " + json.dumps({"collective_us": per_collective_us, "step_ms": per_step_ms}),
          flush=True)
dist.destroy_process_group()
'''


def one(script: Path, ranks: int, instrumented: bool, tmp: Path, i: int, *,
        sizes: tuple[int, int]) -> dict[str, float]:
    run = tmp / f"run-{'on' if instrumented else 'off'}-{i}"
    argv = [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", str(ranks),
            "--run-dir", str(run), *([] if instrumented else ["--no-instrument"]),
            str(script), str(sizes[0]), str(sizes[1])]
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.monotonic() - start
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"benchmark job failed (exit {done.returncode}): {done.stderr[-800:]}")
    return {**json.loads(line[6:]), "launch_s": wall}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--collectives", type=int, default=5000)
    p.add_argument("--steps", type=int, default=40)
    ns = p.parse_args()
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "bench_worker.py"
        script.write_text(WORKER)
        for i in range(ns.repeats):
            for instrumented in (False, True):  # alternate: drift hits both the same
                sizes = (ns.collectives, ns.steps)
                results[instrumented].append(
                    one(script, ns.ranks, instrumented, Path(tmp), i, sizes=sizes))
    print(f"instrumentation overhead, {ns.ranks} gloo ranks, median of {ns.repeats} runs each")
    for key, label, unit in (("collective_us", "tiny all_reduce", "us"),
                             ("step_ms", "training step (matmuls + 4 MB all_reduce)", "ms"),
                             ("launch_s", "launch wall time", "s")):
        off = statistics.median(r[key] for r in results[False])
        on = statistics.median(r[key] for r in results[True])
        print(f"  {label:44s} off {off:9.2f} {unit:2s}  on {on:9.2f} {unit:2s}  "
              f"ratio {on / off:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
