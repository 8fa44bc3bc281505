"""Whole-process throughput of `distrun diagnose` against `grep -E -f` on the same log.

Generates a training-like log (default 500 MB; ``--mb 50`` for a quick run) in a
temporary directory under /tmp (deleted at the end), with a handful of real
error lines near the end, then times, as whole processes with start-up
included:

- ``python -m distrun.cli.diagnose LOG`` (the verdict a user reads), and
- ``grep -E -n -f PATTERNS LOG`` with the same patterns (the rule set's own),
  LC_ALL=C, grep's fastest mode,

and prints the medians and the ratio engine_speed / grep_speed, for wall time
and for CPU time (user + system of the child; steadier on a busy machine).

Fairness: one untimed run of each first (page cache warm for both; the engine
compiles its pattern database once and caches it, in a private cache folder
here, as it does for a user; the cold first run is printed too); then runs
alternate, and which goes first flips each round. Before timing, the engine's
matcher and grep must report the same matching lines, or the run fails.

Not part of the test suite: ``python benchmarks/diagnose_throughput.py --mb 100``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distrun.diagnose.matcher import Matcher
from distrun.diagnose.rules import default_rules

SRC = Path(__file__).resolve().parents[1] / "src"
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


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def same_lines(patterns: Path, log: Path) -> tuple[list[int], list[int]]:
    with log.open("rb") as stream:
        engine = sorted({hit.line for hit in Matcher(default_rules()).scan_stream(stream)})
    done = subprocess.run(["grep", "-E", "-n", "-f", str(patterns), str(log)],
                          capture_output=True, env={**os.environ, "LC_ALL": "C"}, check=False)
    grep = [int(row.split(b":", 1)[0]) for row in done.stdout.splitlines()]
    return engine, grep


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mb", type=int, default=500, help="log size in MB (default 500)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="diagnose-bench-") as tmp:
        log, patterns = Path(tmp) / "train.log", Path(tmp) / "patterns.txt"
        patterns.write_text("\n".join(default_rules().all_patterns()) + "\n")
        generate(log, args.mb)
        engine_lines, grep_lines = same_lines(patterns, log)
        if engine_lines != grep_lines:
            print(f"engine and grep disagree: {engine_lines} vs {grep_lines}", file=sys.stderr)
            return 1
        env = {**os.environ, "PYTHONPATH": str(SRC), "DISTRUN_CACHE_DIR": str(Path(tmp) / "cache")}
        commands = {
            "distrun diagnose": [sys.executable, "-m", "distrun.cli.diagnose", str(log)],
            "grep -E": ["grep", "-E", "-n", "-f", str(patterns), str(log)],
        }
        grep_env = {**os.environ, "LC_ALL": "C"}
        envs = {"distrun diagnose": env, "grep -E": grep_env}
        cold = {name: timed(cmd, envs[name]) for name, cmd in commands.items()}  # untimed
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for round_ in range(args.repeat):
            for name in sorted(commands, reverse=round_ % 2 == 1):
                runs[name].append(timed(commands[name], envs[name]))
        size_mb = log.stat().st_size / 1e6
    return report(runs, cold, size_mb, len(engine_lines))


def report(runs: dict[str, list[tuple[float, float]]], cold: dict[str, tuple[float, float]],
           size_mb: float, lines: int) -> int:
    print(f"log: {size_mb:.0f} MB, {len(default_rules().all_patterns())} patterns, "
          f"{lines} matching lines (engine and grep agree)")
    wall = {name: statistics.median(w for w, _ in timed) for name, timed in runs.items()}
    cpu = {name: statistics.median(c for _, c in timed) for name, timed in runs.items()}
    for name in runs:
        print(f"{name:17} wall {size_mb / wall[name]:7.1f} MB/s (median {wall[name]:.3f} s)  "
              f"cpu {cpu[name]:.3f} s  (first run: wall {cold[name][0]:.3f} s)")
    engine, grep = "distrun diagnose", "grep -E"
    print(f"ratio engine_speed / grep_speed, whole process: wall {wall[grep] / wall[engine]:.2f}, "
          f"cpu {cpu[grep] / cpu[engine]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
