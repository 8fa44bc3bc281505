"""The ``rank_oom`` record: when an out-of-memory error ends a rank, what is known about it.

At interpreter exit, when the exception that ended the script (``sys.last_value``, which
Python sets before the ``atexit`` handlers run) is an out-of-memory error of any vendor, one
``rank_oom`` event goes to ``<run>/events.jsonl`` (docs/run-directory.md): the rank, its device,
the peak of the counter the runtime's memory fit uses (``torch.<type>.max_memory_allocated``
on an accelerator; the resident high-water mark ``VmHWM`` on the CPU), the most that counter
could have reached (the device's memory; on the CPU the resident set plus what the kernel still
gives: ``MemAvailable`` and the room left under ``RLIMIT_AS``), the allocation that failed,
and the batch size and memory fit the runtime noted (:mod:`distrun.model.oom`), else the
per-device batch ``distrun launch`` passed. Only values read here; never torch imported here.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distrun.model import oom, rundir

MAX_ERROR = 300


def install(run_dir: str, rank: int, env: Mapping[str, str]) -> None:
    pid = os.getpid()
    atexit.register(_at_exit, run_dir, rank, dict(env), pid)


def _at_exit(run_dir: str, rank: int, env: Mapping[str, str], pid: int) -> None:
    if os.getpid() != pid:
        return  # a forked child of the rank leaving
    err = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if not isinstance(err, BaseException) or not oom.is_oom(err):
        return
    try:
        line = rundir.event_line("rank_oom", record(err, rank, env))
        fd = rundir.open_append(Path(run_dir) / rundir.EVENTS)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except (OSError, ValueError, TypeError) as exc:
        sys.stderr.write(f"distrun: instrument: out-of-memory record of rank {rank} lost "
                         f"({type(exc).__name__}: {exc})\n")


def record(err: BaseException, rank: int, env: Mapping[str, str]) -> dict[str, Any]:
    """The event's fields (docs/run-directory.md, ``rank_oom``)."""
    text = " ".join(str(err).split())
    out: dict[str, Any] = {"rank": rank, "pid": os.getpid(),
                           "error": f"{type(err).__name__}: {text}"[:MAX_ERROR],
                           "requested_bytes": oom.requested_bytes(text)}
    out.update(cpu_memory() if oom.on_cpu(err) else device_memory(oom.device_index(text)))
    out.update(batch_facts(env))
    return out


def batch_facts(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"world_size": _int(env.get("WORLD_SIZE")),
                           "global_batch": _int(env.get("DISTRUN_GLOBAL_BATCH_SIZE"))}
    noted, passed = oom.noted_batch(), _int(env.get("DISTRUN_PER_DEVICE_BATCH_SIZE"))
    if noted is not None:
        out.update(batch_size=noted.size, batch_source=noted.source)
    elif passed is not None:
        out.update(batch_size=passed, batch_source="DISTRUN_PER_DEVICE_BATCH_SIZE from "
                                                   "distrun launch")
    found, fit = oom.noted_found(), oom.noted_fit()
    if found is not None:
        out["found_batch"] = {"size": found.size, "source": found.source}
    if fit is not None:
        out["fit"] = {"intercept": fit.intercept, "slope": fit.slope, "sizes": list(fit.sizes),
                      "source": fit.source}
    return out


def cpu_memory() -> dict[str, Any]:
    """The resident peak, and the most the resident set could have reached."""
    capacity, limit = oom.cpu_capacity()
    return {"device": "cpu", "device_name": "host memory", "peak_bytes": oom.proc_kib("VmHWM") * 1024
            or None, "peak_source": "VmHWM, the resident set's peak",
            "capacity_bytes": capacity, "capacity_source": limit}


def device_memory(named: int | None = None) -> dict[str, Any]:
    """The accelerator's own peak counter and its memory (the device the error names, else the
    current one); None where it cannot say."""
    torch = sys.modules.get("torch")
    acc = getattr(torch, "accelerator", None)
    if acc is None:
        return {"device": None}
    try:
        kind = acc.current_accelerator()
        if kind is None:
            return {"device": None}
        index = int(acc.current_device_index()) if named is None else named
        ns = getattr(torch, kind.type)
        peak = int(ns.max_memory_allocated(index))
    except (RuntimeError, AttributeError, TypeError, ValueError, AssertionError):
        return {"device": None}
    out: dict[str, Any] = {"device": f"{kind.type}:{index}", "peak_bytes": peak,
                           "peak_source": f"torch.{kind.type}.max_memory_allocated"}
    try:
        free, total = (int(v) for v in ns.mem_get_info(index))
        out.update(capacity_bytes=total, capacity_source="the device's total memory",
                   free_bytes=free, device_name=str(ns.get_device_name(index)))
    except (RuntimeError, AttributeError, TypeError, ValueError, AssertionError):
        pass
    return out


def _int(raw: str | None) -> int | None:
    return int(raw) if raw is not None and raw.isdigit() and int(raw) > 0 else None
