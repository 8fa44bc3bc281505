"""The monitor's own cost: CPU time of the watcher's 1 Hz tick as % of one core, and the
cost of one ``ctx.step()`` (a heartbeat pwrite plus, at most once a second, an event).

    PYTHONPATH=src python benchmarks/monitor_overhead.py [--ranks 8] [--seconds 20]

The tick reads events.jsonl, every rank's heartbeat file, samples each rank's process with
psutil and the devices (NVML where present), and appends to samples.jsonl: real ranks are
stood in for by threads beating through the runtime's Heartbeat at 100 steps/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from distrun.accelerators.inventory import parse_declared
from distrun.launch.rundir import RunDir
from distrun.model.plan import Request
from distrun.monitor.watcher import LauncherActions, WatchConfig, Watcher
from distrun.plan.planner import build
from distrun.runtime.heartbeat import Heartbeat

STEP_BUDGET_US = 50.0
CPU_BUDGET_PERCENT = 2.0


def step_cost(run: Path, n: int = 200_000) -> float:
    hb = Heartbeat(str(run), 999)
    start = time.perf_counter()
    for i in range(n):
        hb.beat(i, {"loss": 0.5})
    per = (time.perf_counter() - start) / n * 1e6
    hb.close()
    return per


def beater(run: Path, rank: int, stop: threading.Event) -> None:
    hb = Heartbeat(str(run), rank)
    step = 0
    while not stop.wait(0.01):
        step += 1
        hb.beat(step, {"loss": 1.0 / step})
    hb.close()


def tick_cost(run_dir: RunDir, ranks: int, seconds: float) -> float:
    run_dir.event("launch_started", pid=os.getpid(), node_rank=0, world_size=ranks)
    run_dir.event("workers_started", attempt=0, world_size=ranks,
                  ranks={str(r): {"local_rank": r, "node_rank": 0} for r in range(ranks)})
    for r in range(ranks):
        run_dir.event("rank_joined", rank=r, pid=os.getpid(), device="cpu", local_rank=r,
                      node_rank=0)
    stop = threading.Event()
    threads = [threading.Thread(target=beater, args=(run_dir.path, r, stop)) for r in range(ranks)]
    for t in threads:
        t.start()
    watcher = Watcher(run_dir, None, WatchConfig(stall_timeout_s=3600), LauncherActions(run_dir))
    cpu, wall = 0.0, time.monotonic()
    end = wall + seconds
    while time.monotonic() < end:
        before = time.thread_time()
        watcher.tick(time.time())
        cpu += time.thread_time() - before
        time.sleep(1.0)
    wall = time.monotonic() - wall
    stop.set()
    for t in threads:
        t.join()
    watcher.stop()
    return 100.0 * cpu / wall


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20.0)
    ns = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(Path(tmp) / "run")
        plan = build(Request(script="train.py", nproc_per_node=str(ns.ranks)),
                     parse_declared(f"1x{ns.ranks}xcpu"))
        run.write_json("plan.json", plan.model_dump())
        per_step = step_cost(run.path)
        percent = tick_cost(run, ns.ranks, ns.seconds)
        run.close()
    print(f"ctx.step(): {per_step:.1f} us per call (budget {STEP_BUDGET_US:.0f} us: "
          f"{per_step / STEP_BUDGET_US:.2f} of it)")
    print(f"watcher at 1 Hz, {ns.ranks} ranks: {percent:.2f} % of one core (budget "
          f"{CPU_BUDGET_PERCENT:.0f} %: {percent / CPU_BUDGET_PERCENT:.2f} of it)")
    return 0 if per_step < STEP_BUDGET_US and percent < CPU_BUDGET_PERCENT else 1


if __name__ == "__main__":
    raise SystemExit(main())
