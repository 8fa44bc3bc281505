"""No process left behind: orphans of the ranks come back to the launcher and are ended.

The launcher marks itself a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), so a
process a rank started that outlives the rank is re-parented to the launcher instead of
PID 1. After the job, every remaining descendant gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import ctypes
import sys

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0


def sweep(grace_s: float = 3.0, keep: int | None = None) -> list[dict[str, object]]:
    """End every descendant of this process but ``keep`` (the launcher's own guardian, which
    leaves when released); what was ended, for the events file."""
    procs = [p for p in psutil.Process().children(recursive=True) if p.pid != keep]
    ended: list[dict[str, object]] = []
    for proc in procs:
        try:
            ended.append({"pid": proc.pid, "name": proc.name(), "cmdline": proc.cmdline()[:4]})
        except psutil.Error:
            continue
    end(procs, grace_s)
    return ended


def end(procs: list[psutil.Process], grace_s: float = 3.0) -> None:
    """SIGTERM to each, SIGKILL to those still alive after ``grace_s``; gone ones are skipped."""
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(alive, timeout=grace_s)
