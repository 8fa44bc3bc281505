"""The cost of ``ctx.step()`` per call, against what a training loop does anyway.

``ctx.step`` here writes a real heartbeat (one pwrite per call, a progress event at most once
a second) into a temporary run directory, as under ``distrun launch``. Baselines measured in
the same run: ``time.time()`` and ``print(..., file=devnull)`` (the cheapest logging a loop
would do). Target: under 50 µs per call.

    PYTHONPATH=src python benchmarks/step_cost.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable

from distrun.runtime.context import Context
from distrun.runtime.heartbeat import Heartbeat

N = 200_000


def per_call_us(fn: Callable[[int], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for i in range(N):
            fn(i)
        best = min(best, time.perf_counter() - start)
    return best / N * 1e6


def main() -> int:
    with tempfile.TemporaryDirectory() as run_dir, open(os.devnull, "w") as devnull:
        hb = Heartbeat(run_dir, 0)
        ctx = Context(0, 0, 2, 0, "cpu", "gloo", "torchelastic", heartbeat=hb)
        step = per_call_us(lambda i: ctx.step(i, loss=0.5, lr=1e-3))
        clock = per_call_us(lambda i: time.time())
        printed = per_call_us(lambda i: print(i, 0.5, file=devnull))
        hb.close()
    print(f"ctx.step(i, loss=, lr=) with heartbeat:  {step:7.3f} µs/call")
    print(f"time.time():                            {clock:7.3f} µs/call")
    print(f"print(..., file=devnull):               {printed:7.3f} µs/call")
    print(f"ratio ctx.step / print-to-devnull: {step / printed:.2f}")
    print(f"ratio ctx.step / time.time():      {step / clock:.2f}")
    ok = step < 50
    print(f"target < 50 µs per call: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
