"""Peak memory of the real training step, measured at a few batch sizes and fitted.

    fit = ctx.estimate_memory(step_fn, make_batch, sizes=(2, 4, 8))
    fit.predict(64)            # bytes at batch 64
    fit.largest_batch(budget)  # the largest batch whose peak stays under budget bytes

The peak is the device's own counter (``torch.<type>.max_memory_allocated`` after
``reset_peak_memory_stats``) for cuda/xpu/npu/mlu/gcu. On CPU it is the process's peak
resident set: the kernel's high-water mark (VmHWM in /proc/self/status), reset to the current
RSS before each step by writing 5 to /proc/self/clear_refs; tracemalloc would not see torch's
tensors (allocated in C++), and a sampling thread misses short peaks. Where clear_refs cannot
be written, the RSS is sampled every millisecond by a thread instead. glibc's mmap threshold is
fixed at 64 KiB while measuring on CPU, so that freed buffers leave the resident set at once.
torch is imported lazily.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distrun.model import oom
from distrun.runtime import device as devmod

StepFn = Callable[[Any], Any]
MakeBatch = Callable[[int], Any]


@dataclass(frozen=True)
class MemoryFit:
    """peak = intercept + slope * batch, fitted by least squares to measured peaks."""

    device: str
    sizes: tuple[int, ...]
    peaks: tuple[int, ...]
    intercept: float
    slope: float

    def predict(self, batch: int) -> int:
        return int(self.intercept + self.slope * batch)

    def largest_batch(self, budget_bytes: float) -> int:
        """The largest batch whose predicted peak is within ``budget_bytes`` (0: none)."""
        if self.slope <= 0:
            return 0 if self.intercept > budget_bytes else 2**31
        return max(0, int((budget_bytes - self.intercept) // self.slope))


def fit_line(sizes: Sequence[int], peaks: Sequence[int]) -> tuple[float, float]:
    """Least-squares (intercept, slope); one point: a line through the origin."""
    n = len(sizes)
    if n == 1:
        return 0.0, peaks[0] / sizes[0]
    mx, my = sum(sizes) / n, sum(peaks) / n
    sxx = sum((x - mx) ** 2 for x in sizes)
    sxy = sum((x - mx) * (y - my) for x, y in zip(sizes, peaks, strict=True))
    slope = sxy / sxx if sxx else 0.0
    return my - slope * mx, slope


class PeakCounter:
    """reset() then run, then peak(): bytes at the high-water mark of the device (or process)."""

    def __init__(self, device: object) -> None:
        """``device``: ``ctx.device`` (a torch.device) or its name (``cuda:0``, ``cpu``)."""
        self.device_type = str(device).split(":", maxsplit=1)[0]
        self.ns = None if self.device_type in devmod.UNBOUND else devmod.namespace(
            self.device_type)
        self._sampler: _RssSampler | None = None
        if self.ns is None:
            _fixed_mmap_threshold()

    def reset(self) -> None:
        free_memory(self.device_type)
        if self.ns is not None:
            self.ns.synchronize()
            self.ns.reset_peak_memory_stats()
        elif not _clear_refs():
            self._sampler = _RssSampler()

    def peak(self) -> int:
        if self.ns is not None:
            self.ns.synchronize()
            return int(self.ns.max_memory_allocated())
        if self._sampler is not None:
            value, self._sampler = self._sampler.stop(), None
            return value
        return oom.proc_kib("VmHWM") * 1024


def measure_peak(counter: PeakCounter, step_fn: StepFn, make_batch: MakeBatch,
                 size: int) -> int:
    """The peak of one real step at ``size`` (the batch is made before the counter is reset)."""
    batch = make_batch(size)
    counter.reset()
    step_fn(batch)
    peak = counter.peak()
    del batch
    return peak


def estimate(device: object, step_fn: StepFn, make_batch: MakeBatch,
             sizes: Sequence[int] = (2, 4, 8), warmup: bool = True) -> MemoryFit:
    """Run the step at each size (ascending, after one warm-up step that creates gradients and
    optimizer state), fit peak = a + b * batch."""
    ordered = sorted(set(sizes))
    if not ordered or ordered[0] < 1:
        raise ValueError(f"sizes {tuple(sizes)!r}: give two or three batch sizes >= 1")
    if warmup:
        step_fn(make_batch(ordered[0]))
    counter = PeakCounter(device)
    peaks = [measure_peak(counter, step_fn, make_batch, s) for s in ordered]
    a, b = fit_line(ordered, peaks)
    return MemoryFit(str(device), tuple(ordered), tuple(peaks), a, b)


def free_memory(device_type: str) -> None:
    """Release what can be released between trials: Python garbage, the vendor's cache."""
    gc.collect()
    if device_type in devmod.UNBOUND:
        _malloc_trim()
        return
    ns = devmod.namespace(device_type)
    if ns is not None and hasattr(ns, "empty_cache"):
        ns.empty_cache()


def _malloc_trim() -> None:
    """Give the C heap's free pages back to the kernel (glibc), so RSS counts live memory."""
    _libc_call("malloc_trim", 0)


def _fixed_mmap_threshold() -> None:
    """Make glibc serve every buffer of 64 KiB or more with its own mmap, freed on release.

    glibc's default threshold moves up (to 32 MiB) after the first large free, and freed
    buffers below it stay resident: the RSS high-water mark then depends on what earlier trials
    left behind, not on this trial's tensors (seen here: a fit off by 3.7x in the batch term).
    A fixed threshold makes RSS follow live tensors. It stays set for the rest of the process
    (glibc cannot go back to the moving threshold); the cost is an mmap per large CPU buffer.
    """
    _libc_call("mallopt", _M_MMAP_THRESHOLD, 64 * 1024)


def _libc_call(name: str, *args: int) -> None:
    """Call glibc's ``name(*args)``; nothing where there is no glibc (musl, macOS)."""
    import ctypes
    import ctypes.util

    lib = ctypes.util.find_library("c")
    if not lib:
        return
    try:
        getattr(ctypes.CDLL(lib), name)(*args)
    except (OSError, AttributeError):
        return


_M_MMAP_THRESHOLD = -3  # glibc malloc.h


def _clear_refs() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


class _RssSampler:
    """Peak RSS by sampling (where the kernel's high-water mark cannot be reset)."""

    def __init__(self, interval_s: float = 0.001) -> None:
        self._stop = threading.Event()
        self._peak = _rss_bytes()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self._peak = max(self._peak, _rss_bytes())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self._peak, _rss_bytes())


def _rss_bytes() -> int:
    try:
        import resource

        usage = oom.proc_kib("VmRSS")
        return usage * 1024 if usage else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except ImportError:
        return 0
