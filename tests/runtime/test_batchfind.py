"""The batch-size finder: the pure search, OOM recognition, the cache, and a real 2-rank job."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.runtime import batchcache
from distrun.runtime.batchfind import EDGE_MARGIN, done, find, is_oom, line_guess, search
from tests.conftest import REPO, cli_env

JOBS = Path(__file__).parent / "memjobs"


@pytest.mark.parametrize("noise", [0.7, 0.97, 1.05, 1.5, 2.0])
def test_search_lands_within_10_percent_in_8_trials(noise: float) -> None:
    """Whatever the limit (1..100000) and however wrong the fit's guess (0.7x..2x)."""
    rng = random.Random(0)
    for limit in [*range(1, 200), *(rng.randint(200, 100000) for _ in range(300))]:
        for start in (1, 8, 64):
            res = search(lambda s, lim=limit: s <= lim, lambda lim=limit: int(lim * noise),
                         start, 100000)
            assert len(res.trials) <= 8
            assert 0.9 * limit <= res.size <= limit, (limit, start, res)


@pytest.mark.parametrize("flat", [0.001, 0.02, 0.1, 0.3])
def test_search_recovers_when_the_first_two_peaks_look_flat(flat: float) -> None:
    """CPU peaks at small sizes are mostly allocator noise: the first two points grow by only
    ``flat`` of the real slope, the line through them guesses up to 1000x too high, and the
    trial there fails. Every later point is exact. The search lands within 10 % in 8 trials."""
    rng = random.Random(1)
    for limit in (rng.randint(1000, 90000) for _ in range(200)):
        for start in (1, 8, 64):
            fixed = 2.0 * limit
            budget = (fixed + limit) / EDGE_MARGIN
            points: dict[int, int] = {}

            def trial(size: int, fixed: float = fixed, budget: float = budget,
                      points: dict[int, int] = points) -> bool:
                if fixed + size > budget:
                    return False
                points[size] = int(fixed + size * (flat if len(points) < 2 else 1.0))
                return True

            def guess(budget: float = budget, points: dict[int, int] = points) -> int | None:
                if len(points) < 2:
                    return None
                fitted = line_guess(points, budget * EDGE_MARGIN)
                return None if fitted >= 2**31 - 1 else fitted  # as Finder.guess

            res = search(trial, guess, start, 100000)
            largest = int(budget - fixed)
            assert len(res.trials) <= 8, (limit, start, res)
            assert 0.9 * largest <= res.size <= largest, (limit, start, res)


def test_search_without_a_guess_doubles_then_bisects() -> None:
    res = search(lambda s: s <= 100, lambda: None, 8, 1000)
    assert [s for s, _ in res.trials][:4] == [8, 16, 32, 64]
    assert 91 <= res.size <= 100


@pytest.mark.parametrize(("err", "oom"), [
    (MemoryError(), True),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
                  "allocate memory: you tried to allocate 57229312 bytes. Error code 12"), True),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total)"),
     True),
    (RuntimeError("HIP out of memory. Tried to allocate 1.00 GiB"), True),
    (RuntimeError("XPU out of memory. Tried to allocate 512.00 MiB"), True),
    (RuntimeError("NPU out of memory. Tried to allocate 1.50 GiB (NPU 0; 60.97 GiB total)"), True),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)"), False),
    (ValueError("out of memory"), False),
])
def test_is_oom(err: BaseException, oom: bool) -> None:
    assert is_oom(err) is oom


def test_torch_out_of_memory_error_is_oom() -> None:
    import torch

    assert is_oom(torch.OutOfMemoryError("CUDA out of memory"))


def test_cache_gives_the_next_search_its_start(tmp_path: Path) -> None:
    import torch

    model = torch.nn.Linear(4, 4)
    env = {"DISTRUN_CACHE_DIR": str(tmp_path)}
    tried: list[int] = []

    def step(batch: torch.Tensor) -> None:
        tried.append(len(batch))
        model(batch).sum().backward()

    first = find("cpu", 1, step, lambda n: torch.randn(n, 4), start=2, maximum=64,
                 model=model, env=env)
    # the answer keeps EDGE_MARGIN below the largest size that passed (cached as found)
    assert 58 <= first.fits_up_to <= 64 and not first.started_from_cache
    assert first.size == int(first.fits_up_to * EDGE_MARGIN)
    data = json.loads((tmp_path / batchcache.FILE).read_text())
    assert [v["size"] for v in data.values()] == [first.fits_up_to]
    tried.clear()
    again = find("cpu", 1, step, lambda n: torch.randn(n, 4), start=2, maximum=64,
                 model=model, env=env)
    assert again.started_from_cache and tried[0] == first.fits_up_to
    if done(first.fits_up_to, 65, 64, 0.06):  # the first search proved its answer: one trial
        assert tried == [first.fits_up_to] and again.size == first.size
    else:  # it ran out of trials below the edge (its guesses read this process's memory,
        # which earlier tests change): the next one goes on from there
        assert again.fits_up_to >= first.fits_up_to
    other = batchcache.key(batchcache.model_signature(torch.nn.Linear(4, 5)), "cpu", 1, "fp32")
    assert batchcache.load(env, other) is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_two_ranks_with_different_ceilings_agree(tmp_path: Path, marker: str) -> None:
    """Rank 0 may grow its address space by 300 MiB, rank 1 by 180 MiB (RLIMIT_AS). glibc's
    per-thread arenas reserve 64 MiB of address space each (not memory), so the job runs with
    MALLOC_ARENA_MAX=1 to make the ceiling a memory ceiling."""
    env = cli_env({"DISTRUN_TEST_MARK": marker, "CEILINGS_MB": "300,180", "REFERENCE_RANK": "1",
                   "MALLOC_ARENA_MAX": "1", "DISTRUN_CACHE_DIR": str(tmp_path / "cache"),
                   "OMP_NUM_THREADS": "1"})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), str(JOBS / "find_worker.py"), str(tmp_path),
           "job"]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=360,
                         check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    print(f"agreed {r0['size']} in {len(r0['trials'])} trials {r0['trials']}; "
          f"largest that fits under the smaller ceiling: {r1['reference']}")
    assert r0["size"] == r1["size"] and r0["trials"] == r1["trials"]
    assert len(r0["trials"]) <= 8
    assert r0["ran"] and r1["ran"]
    assert 0.9 * r1["reference"] <= r1["size"] <= r1["reference"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_launch_passes_preset_global_batch_and_train_table(tmp_path: Path, marker: str) -> None:
    """distrun launch --config (preset, global batch, [train]) -> every rank's ctx.plan_batch
    and ctx.train: the same layout on both ranks, the global batch exact."""
    cfg = tmp_path / "balanced.toml"
    cfg.write_text('preset = "balanced"\nglobal_batch_size = 96\n\n[train]\ndepth = 16\n')
    res = subprocess.run(
        [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "2",
         "--config", str(cfg), "--run-dir", str(tmp_path / "run"),
         str(JOBS / "preset_job.py"), marker],
        cwd=tmp_path, env=cli_env({"DISTRUN_TEST_MARK": marker,
                                   "DISTRUN_CACHE_DIR": str(tmp_path / "cache")}),
        capture_output=True, text=True, timeout=280, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    logs = "".join((tmp_path / "run" / "logs" / f"rank-{r}.log").read_text() for r in (0, 1))
    rows = [json.loads(line.split("LAYOUT ", 1)[1]) for line in logs.splitlines()
            if "LAYOUT " in line]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    assert {(r["per_device"], r["accum"], r["global"]) for r in rows} == {
        (rows[0]["per_device"], rows[0]["accum"], 96)}
    assert rows[0]["per_device"] * rows[0]["accum"] * 2 == 96
    assert all(r["train"] == {"depth": 16} for r in rows)
