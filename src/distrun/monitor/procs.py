"""Rank processes through psutil: CPU use (the stand-in for device utilisation on CPU),
resident memory, and finding a rank's pid among the launcher's children by its env."""

from __future__ import annotations

import psutil

from distrun.monitor.samples import ProcSample


class ProcSampler:
    """Keeps one psutil.Process per pid so ``cpu_percent`` measures since the last tick."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def read(self, pids: list[int]) -> dict[int, ProcSample]:
        return {pid: self._one(pid) for pid in pids}

    def _one(self, pid: int) -> ProcSample:
        try:
            proc = self._procs.get(pid)
            if proc is None:
                proc = self._procs[pid] = psutil.Process(pid)
                proc.cpu_percent(None)
                return ProcSample(pid, None, proc.memory_info().rss)
            with proc.oneshot():
                return ProcSample(pid, proc.cpu_percent(None), proc.memory_info().rss,
                                  proc.status() != psutil.STATUS_ZOMBIE)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self._procs.pop(pid, None)
            return ProcSample(pid, None, None, alive=False)


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
