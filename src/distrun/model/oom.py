"""Out-of-memory errors, recognised the same way in every rank (standard library only).

The runtime's batch finder treats them as "this size does not fit"; the per-rank
instrumentation records one as a ``rank_oom`` event when it ends a rank (docs/estimate.md,
"After an out-of-memory error"). What the rank's own code learnt about its memory (the batch
it was given, a measured fit of peak memory against the batch) is noted here by the runtime,
so the record can carry it; a note is a plain value, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# RuntimeError texts of out-of-memory errors: CUDA/ROCm (HIP), XPU, Ascend NPU, Cambricon MLU,
# Enflame GCU, torch's CPU allocator.
OOM_TEXT = re.compile(
    r"out of memory|DefaultCPUAllocator: can't allocate memory|"
    r"(?:CUDA|HIP|XPU|NPU|MLU|GCU|cuda|hip|xpu|npu|mlu|gcu) error: out of memory|"
    r"NPU out of memory|MLU out of memory|GCU out of memory|Tried to allocate", re.IGNORECASE)
CPU_TEXT = re.compile(r"DefaultCPUAllocator|alloc_cpu\.cpp")
# "Tried to allocate 2.00 GiB" (CUDA and the vendors' copies of its message), "you tried to
# allocate 8000000000 bytes" (torch's CPU allocator)
_REQUEST = re.compile(r"(?:T|you t)ried to allocate ([0-9.]+) ?(bytes|[KMGT]iB)")
# "GPU 1 has a total capacity of 79.19 GiB" (torch >= 2.1), "(GPU 1; 79.19 GiB total capacity"
_DEVICE = re.compile(r"\b[GNX]PU (\d+)(?: has a total capacity|; )")
_UNIT = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def is_oom(err: BaseException) -> bool:
    """True for any vendor's out-of-memory error (never for other failures)."""
    if isinstance(err, MemoryError):
        return True
    if type(err).__name__ == "OutOfMemoryError":  # torch.OutOfMemoryError, torch.cuda's alias
        return True
    return isinstance(err, RuntimeError) and bool(OOM_TEXT.search(str(err)))


def on_cpu(err: BaseException) -> bool:
    """The host's memory ran out (torch's CPU allocator, Python's MemoryError)."""
    return isinstance(err, MemoryError) or bool(CPU_TEXT.search(str(err)))


def requested_bytes(text: str) -> int | None:
    """The allocation that failed, as the error names it; None when it does not."""
    found = _REQUEST.search(text)
    if found is None:
        return None
    try:
        return int(float(found.group(1)) * _UNIT[found.group(2)])
    except (ValueError, OverflowError):
        return None


def device_index(text: str) -> int | None:
    """The device the error names (the allocator's message names the one that ran out)."""
    found = _DEVICE.search(text)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class FitNote:
    """peak = intercept + slope x batch, measured on this rank (``source`` says by what)."""

    intercept: float
    slope: float
    sizes: tuple[int, ...]
    source: str


@dataclass(frozen=True)
class BatchNote:
    size: int
    source: str


_NOTES: dict[str, object] = {}


def note_batch(size: int, source: str) -> None:
    """The batch size this rank's code was handed last (``ctx.batch_size()``, the finder)."""
    _NOTES["batch"] = BatchNote(int(size), source)


def note_found(size: int, source: str) -> None:
    """The batch size a real search agreed on (``ctx.find_batch_size``, ``ctx.plan_batch``)."""
    _NOTES["found"] = BatchNote(int(size), source)


def note_fit(intercept: float, slope: float, sizes: tuple[int, ...], source: str) -> None:
    _NOTES["fit"] = FitNote(float(intercept), float(slope), tuple(sizes), source)


def noted_batch() -> BatchNote | None:
    value = _NOTES.get("batch")
    return value if isinstance(value, BatchNote) else None


def noted_found() -> BatchNote | None:
    value = _NOTES.get("found")
    return value if isinstance(value, BatchNote) else None


def noted_fit() -> FitNote | None:
    value = _NOTES.get("fit")
    return value if isinstance(value, FitNote) else None


def proc_kib(field: str, path: str = "/proc/self/status") -> int:
    """A ``Field:   N kB`` value of a /proc file in KiB (VmHWM, VmRSS, MemAvailable, ...); 0
    when the file or the field is not there. The runtime's memory fit, the ``rank_oom`` record
    and the launch preflight read the kernel's counters through this one function."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def cpu_capacity() -> tuple[int | None, str]:
    """The most this process's resident set can reach, and what limits it: its RSS plus what
    the kernel still gives it, the smaller of ``MemAvailable`` and the room left under
    ``RLIMIT_AS`` (the batch finder's budget on CPU and the ``rank_oom`` record's capacity)."""
    import resource

    rss, size = proc_kib("VmRSS") * 1024, proc_kib("VmSize") * 1024
    room, limit = proc_kib("MemAvailable", "/proc/meminfo") * 1024 or None, "MemAvailable"
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and (room is None or soft - size < room):
        room, limit = max(0, soft - size), f"RLIMIT_AS {soft / 2**30:.2f} GiB of address space"
    return (None if room is None or not rss else rss + room), limit
