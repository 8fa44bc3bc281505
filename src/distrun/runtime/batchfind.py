"""The largest batch size every rank can run: real trials, agreed by a collective, cached.

Each trial runs the user's step at one size on every rank; an out-of-memory error of any
vendor is a "no". After each trial the ranks take the MIN of "fits" (all_reduce), so they
walk the same sizes; the next size comes from the fitted peak-vs-batch line and each rank's
memory budget (MIN over ranks), else doubling, then bisection, until the answer is within
``tolerance`` of the largest size that fits on the smallest device, in at most ``max_trials``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from distrun.model import oom
from distrun.model.oom import OOM_TEXT, is_oom
from distrun.runtime import batchcache, memory
from distrun.runtime.errors import BatchSizeError

__all__ = ["OOM_TEXT", "Finder", "Search", "find", "is_oom", "search"]

EDGE_MARGIN = 0.97  # with the 6 % search tolerance the answer stays within 10 % of the limit


@dataclass(frozen=True)
class Search:
    """The agreed size, the trials that led to it, and the bracket it proves."""

    size: int
    trials: tuple[tuple[int, bool], ...]
    fits_up_to: int
    fails_at: int | None
    started_from_cache: bool = False


Trial = Callable[[int], bool]
Guess = Callable[[], int | None]


def search(trial: Trial, guess: Guess, start: int, maximum: int, *, max_trials: int = 8,
           tolerance: float = 0.1) -> Search:
    """Pure search over an agreed ``trial`` (True: fits) and ``guess`` (largest size by the fit)."""
    lo, hi = 0, maximum + 1
    size = max(1, min(start, maximum))
    trials: list[tuple[int, bool]] = []
    while len(trials) < max_trials:
        ok = trial(size)
        trials.append((size, ok))
        lo, hi = (size, hi) if ok else (lo, size)
        if done(lo, hi, maximum, tolerance):
            break
        size = next_size(lo, hi, guess(), trials, tolerance)
    return Search(lo, tuple(trials), lo, None if hi > maximum else hi)


def done(lo: int, hi: int, maximum: int, tolerance: float) -> bool:
    if lo >= maximum or hi <= 1:
        return True
    return lo > 0 and hi - 1 <= lo * (1 + tolerance)


def next_size(lo: int, hi: int, guess: int | None, trials: Sequence[tuple[int, bool]],
              tolerance: float) -> int:
    """The next size strictly between lo (fits) and hi (fails): the fit's guess when it is
    informative, else doubling (no failure yet) or geometric bisection (bracketed)."""
    if lo == 0:  # nothing fits yet: below the smallest failure
        return max(1, min(guess or hi // 2, hi // 2))
    probe = min(int(lo * (1 + tolerance)) + 1, hi - 1)  # just past the tolerance
    usable = guess if guess is not None and len(trials) >= 2 else None
    if usable is not None and usable <= lo:
        return probe
    if usable is not None and usable < hi * 0.95:
        return min(max(usable, probe), hi - 1)
    if usable is None and hi > lo * 4:  # no line yet: double
        return min(lo * 2, hi - 1)
    mid = int((lo * hi) ** 0.5)
    if usable is not None and not missed_twice(trials):
        mid = max(mid, int(hi * 0.7))  # the line overshot once: the limit is likely just below
    return min(max(mid, lo + 1, probe if hi > lo * 1.5 else lo + 1), hi - 1)


def missed_twice(trials: Sequence[tuple[int, bool]]) -> bool:
    """The last two trials failed: a line from nearly equal peaks (allocator noise at small
    sizes) can guess 10x too high, and stepping down from it by 0.7x would spend every trial;
    bisect instead: a size that fits adds a point, and the line is fitted again."""
    return len(trials) >= 2 and not trials[-1][1] and not trials[-2][1]


def line_guess(points: Mapping[int, int], budget: float) -> int:
    """The largest size whose peak, on the line fitted to the measured (size, peak) points,
    is within ``budget``."""
    sizes = sorted(points)
    a, b = memory.fit_line(sizes, [points[s] for s in sizes])
    return memory.MemoryFit("", tuple(sizes), (), a, b).largest_batch(budget)


class Finder:
    """Trials on this rank's device; every answer agreed with the other ranks by all_reduce MIN."""

    def __init__(self, device: object, step_fn: memory.StepFn, make_batch: memory.MakeBatch,
                 world_size: int, *, headroom: float = 0.97,
                 fraction: float | None = None) -> None:
        self.device = str(device)
        self.step_fn, self.make_batch = step_fn, make_batch
        self.world_size = world_size
        self.headroom = headroom
        self.counter = memory.PeakCounter(device)
        self.points: dict[int, int] = {}
        self.cap: int | None = None  # a preset's peak limit: in use now + fraction x free
        budget = device_budget(self.counter)
        if fraction is not None and budget is not None:
            used = current_usage(self.counter)
            self.cap = int(used + fraction * max(0, budget - used))

    def trial(self, size: int) -> bool:
        ok = self._run(size) and (self.cap is None or self.points[size] <= self.cap)
        memory.free_memory(self.counter.device_type)
        return bool(self.agree_min(int(ok)))

    def _run(self, size: int) -> bool:
        try:
            self.points[size] = memory.measure_peak(self.counter, self.step_fn, self.make_batch,
                                                    size)
        except (RuntimeError, MemoryError) as err:
            if not is_oom(err):
                raise
            return False
        return True

    def guess(self) -> int | None:
        """The largest size whose fitted peak fits this rank's budget; MIN over ranks."""
        local = 2**31 - 1
        budget = device_budget(self.counter) if self.cap is None else self.cap
        if len(self.points) >= 2 and budget is not None:
            local = min(local, line_guess(self.points, budget * self.headroom))
        agreed = self.agree_min(local)
        return None if agreed >= 2**31 - 1 else agreed

    def agree_min(self, value: int) -> int:
        if self.world_size <= 1:
            return value
        import torch
        import torch.distributed as dist

        where = "cpu" if dist.get_backend() == "gloo" else self.device
        tensor = torch.tensor([value], dtype=torch.int64, device=where)
        dist.all_reduce(tensor, op=dist.ReduceOp.MIN)
        return int(tensor.item())


def device_budget(counter: memory.PeakCounter) -> int | None:
    """Bytes the peak counter may reach on this device (None: unknown)."""
    if counter.ns is not None:
        try:
            free, _total = counter.ns.mem_get_info()
            return int(free) + int(counter.ns.memory_reserved())
        except (AttributeError, RuntimeError):
            return None
    return cpu_budget()


def current_usage(counter: memory.PeakCounter) -> int:
    """Bytes in use now, in the peak counter's units."""
    if counter.ns is not None:
        return int(counter.ns.memory_allocated())
    return oom.proc_kib("VmRSS") * 1024


def cpu_budget() -> int | None:
    """Peak RSS this process may reach (:func:`distrun.model.oom.cpu_capacity`)."""
    return oom.cpu_capacity()[0]


def device_model(device: object) -> str:
    """The device's model name for the cache key (``cpu`` on CPU)."""
    counter = memory.PeakCounter(device)
    if counter.ns is None or not hasattr(counter.ns, "get_device_name"):
        return counter.device_type
    return str(counter.ns.get_device_name())


def find(device: object, world_size: int, step_fn: memory.StepFn, make_batch: memory.MakeBatch,
         *, start: int = 1, maximum: int = 4096, model: Any = None, precision: str = "fp32",
         rank: int = 0, env: Mapping[str, str] | None = None, max_trials: int = 8,
         tolerance: float = 0.06, fraction: float | None = None) -> Search:
    """The agreed batch size (see the module's docstring); starts at the cached one if any."""
    if start < 1 or maximum < start:
        raise BatchSizeError(f"find_batch_size(start={start}, max={maximum})",
                             "1 <= start <= max", "pass e.g. start=1, max=1024")
    env = os.environ if env is None else env
    finder = Finder(device, step_fn, make_batch, world_size, fraction=fraction)
    entry = None if model is None else batchcache.key(
        batchcache.model_signature(model), device_model(device), world_size,
        precision if fraction is None else f"{precision}@{fraction}")
    cached = batchcache.load(env, entry) if entry else None
    first = finder.agree_min(min(cached or start, maximum))
    result = search(finder.trial, finder.guess, first, maximum, max_trials=max_trials,
                    tolerance=tolerance)
    if result.size < 1:
        raise BatchSizeError(f"no batch size fits on {device}: out of memory already at "
                             f"{min(s for s, _ in result.trials)} (trials {result.trials})",
                             "batch size 1 to fit",
                             "shard the model (FSDP/ZeRO), lower precision, or use a smaller "
                             "model; `distrun estimate` shows the model states per device")
    if entry and rank == 0:
        batchcache.store(env, entry, result.size, result.fails_at)
    if len(finder.points) >= 2:
        sizes = sorted(finder.points)
        a, b = memory.fit_line(sizes, [finder.points[s] for s in sizes])
        remember_fit(memory.MemoryFit(finder.device, tuple(sizes), (), a, b),
                     "ctx.find_batch_size's trials", world_size, env, rank)
    # A size at the very edge can pass one trial and fail later (allocator fragmentation, a
    # larger batch of real data): the answer keeps a small margin below the largest pass.
    safe = max(1, int(result.size * EDGE_MARGIN))
    oom.note_found(safe, "ctx.find_batch_size" if fraction is None else "ctx.plan_batch")
    return replace(result, size=safe, started_from_cache=cached is not None)


def remember_fit(fit: memory.MemoryFit, source: str, world_size: int,
                 env: Mapping[str, str] | None = None, rank: int = 0) -> None:
    """Note the fit for this rank's out-of-memory record; under ``distrun launch``
    (DISTRUN_RUN_DIR set), rank 0 also stores it for the next launch's preflight (keyed by the
    script, the device model and the world size)."""
    oom.note_fit(fit.intercept, fit.slope, fit.sizes, source)
    env = os.environ if env is None else env
    script = sys.argv[0] if sys.argv else ""
    if rank != 0 or not env.get("DISTRUN_RUN_DIR") or not script or not os.path.isfile(script):
        return
    entry = batchcache.fit_key(script, device_model(fit.device), world_size)
    batchcache.store_fit(env, entry, {
        "intercept": fit.intercept, "slope": fit.slope, "sizes": list(fit.sizes),
        "source": source, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
