"""Rank processes through psutil: CPU use (the stand-in for device utilisation on CPU),
resident memory, and finding a rank's pid among the launcher's children by its env."""

from __future__ import annotations

from dataclasses import replace

import psutil

from distrun.monitor.samples import ProcSample

CHILDREN_BELOW_PERCENT = 10.0  # a rank using less than this gets its descendants sampled


class ProcSampler:
    """Keeps one psutil.Process per pid so ``cpu_percent`` measures since the last tick.

    A rank under ``CHILDREN_BELOW_PERCENT`` also gets its live descendants' CPU: a rank's own
    process idles while its DataLoader workers read a batch or a compiler it started builds an
    extension. Listing descendants scans ``/proc``, so a busy rank is not asked."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}
        self._kids: dict[int, psutil.Process] = {}

    def read(self, pids: list[int]) -> dict[int, ProcSample]:
        seen: set[int] = set()
        out = {pid: self._one(pid, seen) for pid in pids}
        self._kids = {pid: proc for pid, proc in self._kids.items() if pid in seen}
        return out

    def _one(self, pid: int, seen: set[int]) -> ProcSample:
        try:
            proc = self._procs.get(pid)
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
                proc.cpu_percent(None)
                return ProcSample(pid, None, proc.memory_info().rss)
            with proc.oneshot():
                sample = ProcSample(pid, proc.cpu_percent(None), proc.memory_info().rss,
                                    proc.status() != psutil.STATUS_ZOMBIE)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self._procs.pop(pid, None)
            return ProcSample(pid, None, None, alive=False)
        if sample.cpu_percent is None or sample.cpu_percent >= CHILDREN_BELOW_PERCENT:
            return sample
        return replace(sample, children_cpu_percent=self._children(proc, seen))

    def _children(self, proc: psutil.Process, seen: set[int]) -> float:
        """The descendants' CPU since the last look (0 for one seen the first time)."""
        total = 0.0
        try:
            children = proc.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return total
        for child in children:
            seen.add(child.pid)
            known = self._kids.setdefault(child.pid, child)
            try:
                total += known.cpu_percent(None) if known is not child else _prime(child)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return total


def _prime(proc: psutil.Process) -> float:
    proc.cpu_percent(None)  # the first call only starts the measurement
    return 0.0


def rank_pids(parent: int) -> dict[int, int]:
    """``{rank: pid}`` of the parent's children that carry torchrun's RANK variable (the
    workers; their own children inherit RANK, so only direct children count)."""
    found: dict[int, int] = {}
    try:
        children = psutil.Process(parent).children(recursive=False)
    except psutil.NoSuchProcess:
        return found
    for child in children:
        try:
            env = child.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
            continue
        rank = env.get("RANK")
        if rank is not None and rank.isdigit() and "TORCHELASTIC_RUN_ID" in env:
            found.setdefault(int(rank), child.pid)
    return found


def signal_caught(pid: int, signum: int) -> bool:
    """Whether the process installed a handler for ``signum`` (Linux /proc SigCgt)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError):
        return False
    return False
