"""The cost of instrumenting every rank (distrun.instrument), against ``--no-instrument`` on the
same job, measured in the same run: per collective (a loop of tiny all_reduces), per p2p op (a
send/recv ping-pong), per training step (matmuls and a 4 MB gradient all_reduce), the wall time
and the CPU time (launcher and ranks) of the whole launch, and the CPU time of the agent's own
thread (``distrun-progress``, read by the worker through its thread CPU clock).

    PYTHONPATH=src python benchmarks/instrument_overhead.py [--ranks 2] [--repeats 5]

Runs ``distrun launch`` alternately with and without instrumentation (gloo, this host) and
prints the medians, their ratios and the range of the per-pair ratios (a shared machine's noise
shows there). Goals: <= 1.02 per tiny collective, <= 1.01 per step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = '''
import json, threading, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t_start = time.perf_counter()
small, n = torch.ones(1), int(__import__("sys").argv[1])
for _ in range(200):
    dist.all_reduce(small)
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(n):
    dist.all_reduce(small)
per_collective_us = (time.perf_counter() - t0) / n * 1e6
cpu_collective_us = (time.process_time() - c0) / n * 1e6
a, grad = torch.randn(384, 384), torch.randn(1 << 20)
steps = int(__import__("sys").argv[2])
t0 = time.perf_counter()
for _ in range(steps):
    for _ in range(8):
        a = torch.tanh(a @ a)
    dist.all_reduce(grad)
per_step_ms = (time.perf_counter() - t0) / steps * 1e3
rank, peer = dist.get_rank(), 1 - dist.get_rank()
pings = n // 4 if rank < 2 else 0
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(pings):  # ranks 0 and 1 play ping-pong; the others wait at the barrier
    if rank == 0:
        dist.send(small, peer)
        dist.recv(small, peer)
    else:
        dist.recv(small, peer)
        dist.send(small, peer)
per_p2p_us = (time.perf_counter() - t0) / max(pings, 1) / 2 * 1e6
cpu_p2p_us = (time.process_time() - c0) / max(pings, 1) / 2 * 1e6
dist.barrier()
agent = [t for t in threading.enumerate() if t.name == "distrun-progress"]
agent_cpu_s = (time.clock_gettime(time.pthread_getcpuclockid(agent[0].ident))
               if agent else 0.0)
if rank == 0:
    print("BENCH " + json.dumps({
        "collective_us": per_collective_us, "step_ms": per_step_ms, "p2p_us": per_p2p_us,
        "collective_cpu_us": cpu_collective_us, "p2p_cpu_us": cpu_p2p_us,
        "agent_cpu_ms_per_s": agent_cpu_s / (time.perf_counter() - t_start) * 1e3}),
          flush=True)
dist.destroy_process_group()
'''


def one(script: Path, ranks: int, instrumented: bool, tmp: Path, i: int, *,
        sizes: tuple[int, int]) -> dict[str, float]:
    run = tmp / f"run-{'on' if instrumented else 'off'}-{i}"
    argv = [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", str(ranks),
            "--run-dir", str(run), *([] if instrumented else ["--no-instrument"]),
            str(script), str(sizes[0]), str(sizes[1])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"benchmark job failed (exit {done.returncode}): {done.stderr[-800:]}")
    return {**json.loads(line[6:]), "launch_s": wall, "launch_cpu_s": cpu}


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
    report(results, ns.ranks, ns.repeats)
    return 0


def report(results: dict[bool, list[dict[str, float]]], ranks: int, repeats: int) -> None:
    print(f"instrumentation overhead, {ranks} gloo ranks, median of {repeats} runs each "
          "(pairs: the range of the per-pair ratios)")
    for key, label, unit in (("collective_us", "tiny all_reduce", "us"),
                             ("collective_cpu_us", "tiny all_reduce, CPU of rank 0's process", "us"),
                             ("p2p_us", "tiny send/recv (per op)", "us"),
                             ("p2p_cpu_us", "tiny send/recv, CPU of rank 0's process", "us"),
                             ("step_ms", "training step (matmuls + 4 MB all_reduce)", "ms"),
                             ("launch_s", "launch wall time", "s"),
                             ("launch_cpu_s", "launch CPU time (launcher + ranks)", "s")):
        off = statistics.median(r[key] for r in results[False])
        on = statistics.median(r[key] for r in results[True])
        pairs = [b[key] / a[key] for a, b in zip(results[False], results[True], strict=True)]
        print(f"  {label:44s} off {off:9.2f} {unit:2s}  on {on:9.2f} {unit:2s}  "
              f"ratio {on / off:.3f}  pairs {min(pairs):.3f}..{max(pairs):.3f}")
    agent = statistics.median(r["agent_cpu_ms_per_s"] for r in results[True])
    print(f"  agent thread CPU on rank 0: {agent:.3f} ms per second of the job "
          f"({agent / 10:.4f} % of one core)")


if __name__ == "__main__":
    raise SystemExit(main())
