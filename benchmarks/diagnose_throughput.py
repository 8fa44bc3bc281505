"""Throughput of the diagnose matcher against `grep -E -f` on the same log.

Generates a training-like log (default 500 MB; ``--mb 50`` for a quick run) in a
temporary directory, with a handful of real error lines near the end, then times
the engine's streaming scan and ``grep -E -c -f patterns`` on the same file, with
the same patterns (the rule set's own), and prints the medians and the ratio
engine_speed / grep_speed. grep runs with LC_ALL=C, its fastest mode.

Fairness: one untimed run of each first (page cache warm for both); then runs
alternate, and which goes first flips each round; the engine's time includes
building its matcher, as grep's includes compiling the patterns; both must
report the same number of matching lines, or the run fails. ``--backend re``
times the pure-Python fallback instead of Hyperscan.

Not part of the test suite: ``python benchmarks/diagnose_throughput.py --mb 100``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distrun.diagnose.matcher import Matcher
from distrun.diagnose.rules import RuleSet, default_rules

TEMPLATES = (
    "step {i}/200000 | loss {f:.4f} | lr {g:.2e} | grad_norm {f:.3f} | tokens/s {n} | mem 34.{n}GB",
    "[INFO|trainer.py:1715] 2026-11-22 04:39:12,123 >> ***** Running training *****",
    "{{'loss': {f:.4f}, 'grad_norm': {g:.4f}, 'learning_rate': {g:.3e}, 'epoch': {f:.2f}}}",
    "gpu-a:{n}:{n} [0] NCCL INFO Channel 0{d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "Epoch 3:  45%|####5     | {n}/10000 [12:34<15:20,  5.97it/s, loss={f:.3f}, v_num=0]",
    "saving checkpoint to /checkpoints/run-7/step_{i}.pt (rank 0 only)",
    "INFO:root:validation perplexity {f:.3f} on 2048 sequences, best so far {g:.3f}",
    "W1122 04:39:12.{n} torch/distributed/run.py:792] Setting OMP_NUM_THREADS to 1",
)
ERRORS = (
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "[rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE) ran for 600060 milliseconds",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
)


def generate(path: Path, megabytes: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    target = megabytes * 1_000_000
    block: list[str] = []
    for i in range(20_000):
        text = rng.choice(TEMPLATES).format(
            i=i, f=rng.random() * 4, g=rng.random() * 1e-3, n=rng.randint(1000, 99999),
            d=rng.randint(0, 9),
        )
        block.append(f"2026-11-22T04:{i // 600 % 60:02d}:{i % 60:02d}.{i:06d}Z out {text}\n")
    chunk = "".join(block).encode()
    written = 0
    with path.open("wb") as out:
        while written < target:
            out.write(chunk)
            written += len(chunk)
        for text in ERRORS:
            out.write(f"2026-11-22T05:00:00.000000Z err {text}\n".encode())


def time_engine(rules: RuleSet, path: Path, fast: bool) -> tuple[float, int]:
    start = time.perf_counter()
    matcher = Matcher(rules, fast=fast)
    with path.open("rb") as stream:
        found = sum(1 for _ in matcher.scan_stream(stream))
    return time.perf_counter() - start, found


def time_grep(patterns: Path, path: Path) -> tuple[float, int]:
    env = {**os.environ, "LC_ALL": "C"}
    start = time.perf_counter()
    done = subprocess.run(
        ["grep", "-E", "-c", "-f", str(patterns), str(path)],
        capture_output=True, text=True, env=env, check=False,
    )
    return time.perf_counter() - start, int(done.stdout.strip() or 0)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=500, help="log size in MB (default 500)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument("--backend", choices=("fast", "re"), default="fast",
                        help="fast: Hyperscan where installed (default); re: the fallback")
    args = parser.parse_args(argv)
    rules, fast = default_rules(), args.backend == "fast"
    with tempfile.TemporaryDirectory() as tmp:
        log, patterns = Path(tmp) / "train.log", Path(tmp) / "patterns.txt"
        patterns.write_text("\n".join(rules.all_patterns()) + "\n")
        generate(log, args.mb)
        size_mb = log.stat().st_size / 1e6
        runs: dict[str, list[tuple[float, int]]] = {"engine": [], "grep -E": []}
        timers = {
            "engine": lambda: time_engine(rules, log, fast),
            "grep -E": lambda: time_grep(patterns, log),
        }
        for timer in timers.values():  # untimed: page cache warm for both
            timer()
        for round_ in range(args.repeat):
            for name in sorted(timers, reverse=round_ % 2 == 1):
                runs[name].append(timers[name]())
    return report(runs, size_mb, rules, Matcher(rules, fast=fast).finder.name)


def report(runs: dict[str, list[tuple[float, int]]], size_mb: float, rules: RuleSet, backend: str) -> int:
    medians = {name: statistics.median(s for s, _ in timed) for name, timed in runs.items()}
    lines = {name: {n for _, n in timed} for name, timed in runs.items()}
    print(f"log: {size_mb:.0f} MB, {len(rules.all_patterns())} patterns, engine line finder: {backend}")
    for name, med in medians.items():
        print(f"{name:8} {size_mb / med:8.1f} MB/s  (median {med:.3f} s, lines {sorted(lines[name])})")
    print(f"ratio engine_speed / grep_speed: {medians['grep -E'] / medians['engine']:.2f}")
    if lines["engine"] != lines["grep -E"]:
        print("engine and grep disagree on the matching lines", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
