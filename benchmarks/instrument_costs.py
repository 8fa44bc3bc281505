"""What each piece of the per-rank instrumentation costs, measured inside one rank (CPU time of
the calling thread, median of repeats), independent of a shared machine's noise:

- the Flight Recorder reads: the status counters the progress thread reads every tick, the
  pickled trace without stacks (``describe``, only for an op stuck for seconds), with
  ``onlyActive`` (gloo never marks an entry completed, so it filters nothing), and the JSON trace
  with stacks (never read by distrun);
- one progress tick with nothing changed, one with changed counters, and one file write;
- the p2p wrapper around ``isend`` per op (a stand-in op, so only the wrapper is timed).

    PYTHONPATH=src python -m torch.distributed.run --nproc-per-node 2 \\
        benchmarks/instrument_costs.py [ENTRIES]

ENTRIES (default 2000, torch's default ``TORCH_FR_BUFFER_SIZE``) tiny all_reduces fill the
Flight Recorder first. Rank 0 prints the table.
"""

from __future__ import annotations

import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from distrun.instrument import flight, p2p
from distrun.instrument.agent import Tracker, Writer


def cpu_us(f: Callable[[], Any], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.thread_time()
        f()
        times.append((time.thread_time() - t0) * 1e6)
    return statistics.median(times)


def wrapper_us(n: int = 20000) -> tuple[float, float]:
    class Done:
        def is_completed(self) -> bool:
            return True

    def stand_in(*_: Any, **__: Any) -> Done:
        return Done()

    rec = p2p.Recorder()
    wrapped = p2p._wrapper(stand_in, True, rec, lambda args, kwargs: (1, "0", 0))
    t = torch.ones(1)
    out = []
    for f in (stand_in, wrapped):
        t0 = time.thread_time()
        for _ in range(n):
            f(t, 1)
        out.append((time.thread_time() - t0) / n * 1e6)
    return out[0], out[1]


def main() -> None:
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    small = torch.ones(1)
    for _ in range(entries):
        dist.all_reduce(small)
    if rank == 0:
        fr = torch._C._distributed_c10d
        with tempfile.TemporaryDirectory() as run:
            tracker = Tracker(Writer(run, rank), rank)

            def changed() -> None:
                tracker._raw = b""
                tracker.update(time.time())

            rows = {
                "status counters (every tick)": cpu_us(flight.status_raw, 200),
                "tick, nothing changed": cpu_us(lambda: tracker.update(time.time()), 200),
                "tick, counters moved (parse; write deferred)": cpu_us(changed, 100),
                "progress file write": cpu_us(lambda: tracker._write(time.time(), False), 100),
                "trace, pickle, no stacks (describe)": cpu_us(
                    lambda: pickle.loads(fr._dump_fr_trace(True, False, False)), 10),
                "trace, pickle, no stacks, onlyActive": cpu_us(
                    lambda: fr._dump_fr_trace(True, False, True), 10),
                "trace, JSON with stacks": cpu_us(lambda: fr._dump_fr_trace_json(True, False), 5),
            }
        plain, wrapped = wrapper_us()
        print(f"instrumentation costs in one rank, {entries} Flight Recorder entries "
              f"(CPU time, median)")
        for label, us in rows.items():
            print(f"  {label:42s} {us:10.1f} us")
        print(f"  {'p2p wrapper per isend (plain -> wrapped)':42s} {plain:6.2f} -> {wrapped:.2f} us")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
