"""One snapshot of a job from its run directory: the data behind ``distrun monitor``'s
table, its ``--json`` output and its Prometheus metrics."""

from __future__ import annotations

import socket
import time
from typing import Any

from distrun.model.record import (
    DeviceRecord,
    JobFinished,
    JobStatus,
    ProcRecord,
    RankExited,
    StallVerdict,
    Verified,
)
from distrun.monitor.state import RankState, RunState
from distrun.monitor.verify import ordinal

IDLE_PERCENT = 1.0


def snapshot(state: RunState, now: float | None = None, stall_timeout_s: float = 30.0
             ) -> dict[str, Any]:
    now = time.time() if now is None else now
    if state.finished is not None and state.finished.at is not None:
        now = state.finished.at  # a finished run: ages as it ended
    sample = state.last_sample
    procs = sample.ranks if sample is not None else {}
    ranks = [_rank(s, procs.get(s.rank), now, stall_timeout_s, state.finished)
             for s in sorted(state.ranks.values(), key=lambda r: r.rank)]
    devices = [_device(d, state) for d in (sample.devices if sample is not None else [])]
    plan = state.plan
    return {
        "run_dir": str(state.path),
        "time": now,
        "status": status(state),
        "exitcode": state.finished.exitcode if state.finished is not None else None,
        "message": (state.finished.message or None) if state.finished is not None else None,
        "first_failure": state.first_failure(),
        "world_size": plan.world_size if plan else None,
        "node_rank": state.node_rank,
        "device_type": plan.device_type if plan else None,
        "backend": plan.backend if plan else None,
        "ranks": ranks,
        "devices": devices,
        "devices_unavailable": (sample.unavailable or None) if sample is not None else None,
        "sample_age_s": now - sample.time if sample is not None else None,
        "verdict": next((e.message for e in reversed(state.notable)
                         if isinstance(e, StallVerdict)), None),
        "checks": [{"severity": e.severity, "message": e.message}
                   for e in state.notable if isinstance(e, Verified)],
        "problems": problems(state),
    }


def status(state: RunState) -> str:
    """The job's status; a launcher that is gone without recording an end ended abnormally."""
    if state.finished is not None:
        return state.finished.status or JobStatus.ENDED_ABNORMALLY.value
    here = state.launcher_host in (None, socket.gethostname())
    if here and state.launcher_pid is not None and not _alive(state.launcher_pid,
                                                               state.launched_at):
        return JobStatus.ENDED_ABNORMALLY.value
    return JobStatus.RUNNING.value if state.workers_at else "starting"


def failure_line(snap: dict[str, Any]) -> str | None:
    """What failed, as ``distrun launch`` said it at the end: the rank that failed first, the
    message and that rank's log; None for a job that succeeded or runs (and for a stall, whose
    verdict says it)."""
    first, message = snap["first_failure"], snap["message"]
    if (first is None and not message) or (snap["status"] == "stalled" and snap["verdict"]):
        return None
    if first is None:
        return f"job {snap['status']}: {message}"
    text = f"rank {first} failed first"
    return f"{text} ({message}); its log: logs/rank-{first}.log" if message else text


def _alive(pid: int, since: float | None) -> bool:
    """Is the launcher still there? (A pid reused by a process started later does not count.)"""
    import psutil

    try:
        started = psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except (psutil.AccessDenied, OSError, ValueError, OverflowError):
        return True
    return since is None or started <= since + 1.0


def problems(state: RunState, limit: int = 20) -> list[str]:
    """What could not be read: the plan, files that are not regular files, and bad lines
    (file:line: why), the first few."""
    out = [f"plan: {state.plan_error}"] if state.plan_error else []
    out += state.refused
    bad = state.bad
    out += [str(b) for b in bad[:limit]]
    if len(bad) > limit:
        out.append(f"... and {len(bad) - limit} more bad lines")
    return out


def end_state(exited: RankExited | None, finished: JobFinished | None) -> str | None:
    """How a rank ended: ``exited 0``, ``failed (exit N)``, ``killed (SIGNAL)``; None while it
    runs. A rank with no exit record in a job that ended: ``exited 0`` when the job succeeded,
    else ``killed`` (the launcher stops the other ranks when one fails)."""
    if exited is not None:
        if exited.signal:
            return f"killed ({exited.signal})"
        return "exited 0" if exited.exitcode == 0 else f"failed (exit {exited.exitcode})"
    if finished is None:
        return None
    return "exited 0" if finished.exitcode == 0 else "killed"


def rank_status(s: RankState, age: float | None, timeout: float,
                finished: JobFinished | None) -> str:
    ended = end_state(s.exited, finished)
    if ended is not None:
        return ended
    if s.stalled:
        return "stalled" if s.stalled.culprit else "waiting"
    if age is not None and age > timeout:
        return "quiet"
    return "running" if s.beat_time else ("joined" if s.joined_at else "starting")


def _rank(s: RankState, proc: ProcRecord | None, now: float, timeout: float,
          finished: JobFinished | None = None) -> dict[str, Any]:
    age = s.age_s(now)
    status = rank_status(s, age, timeout, finished)
    return {
        "rank": s.rank, "node_rank": s.node_rank, "local_rank": s.local_rank, "host": s.host,
        "pid": s.pid, "device": s.device, "step": s.step,
        "steps_per_second": s.steps_per_s(), "loss": s.metrics.get("loss"),
        "heartbeat_age_s": age, "status": status,
        "cpu_percent": proc.cpu_percent if proc else None,
        "rss_bytes": proc.rss_bytes if proc else None,
    }


def _device(d: DeviceRecord, state: RunState) -> dict[str, Any]:
    """A device sample with the ranks on it: by pid, or by the rank's bound ordinal."""
    pids = set(d.pids or [])
    visible = state.visible_devices()
    ranks = sorted(s.rank for s in state.ranks.values() if s.pid in pids
                   or _physical(visible, ordinal(s)) == d.index)
    util = d.utilization_percent
    idle = (d.pids is not None and not pids) or (util is not None and util < IDLE_PERCENT)
    return {**d.model_dump(mode="json"), "ranks": ranks, "idle": idle}


def _physical(visible: list[int], index: int | None) -> int | None:
    return visible[index] if index is not None and 0 <= index < len(visible) else None
