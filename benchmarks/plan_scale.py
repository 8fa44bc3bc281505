"""Plan and export every format for a large declared cluster; the target is under 1 s.

    python benchmarks/plan_scale.py            # 4096 nodes x 8 H100, best of 5
    python benchmarks/plan_scale.py --quick    # one round (a smoke run)

Prints each step's time and the ratio of the total against the 1 s target (below 1.0 = met).
Exit status 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from distrun.checks.preflight import preflight
from distrun.export import FORMATS, ExportOptions, render
from distrun.model.plan import LaunchPlan, Request

TARGET_S = 1.0


def one_round(inventory: str) -> dict[str, float]:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    plan: LaunchPlan = preflight(Request(script="train.py", script_args=("--lr", "3e-4")),
                                 inventory, {})
    times["plan"] = time.perf_counter() - t0
    options = ExportOptions(job_name="scale", time="04:00:00", partition="gpu")
    for fmt in FORMATS:
        t0 = time.perf_counter()
        out = render(fmt, plan, options)
        times[fmt] = time.perf_counter() - t0
        if isinstance(out, dict) and len(out) != plan.nnodes:
            raise SystemExit(f"{fmt}: {len(out)} scripts for {plan.nnodes} nodes")
    times["total"] = sum(times.values())
    return times


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args(argv)
    inventory = f"{args.nodes}x{args.devices}xH100-80GB"
    rounds = [one_round(inventory) for _ in range(1 if args.quick else args.rounds)]
    best = min(rounds, key=lambda r: r["total"])
    print(f"plan + export (all {len(FORMATS)} formats) for {inventory}, "
          f"{len(rounds)} round(s), best round:")
    for step, seconds in best.items():
        print(f"  {step:<11} {seconds * 1000:8.1f} ms")
    median = statistics.median(r["total"] for r in rounds)
    print(f"total {best['total']:.3f} s (median {median:.3f} s); "
          f"ratio to the {TARGET_S:.0f} s target: {best['total'] / TARGET_S:.2f}")
    return 0 if best["total"] < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
