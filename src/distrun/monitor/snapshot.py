"""One snapshot of a job from its run directory: the data behind ``distrun monitor``'s
table, its ``--json`` output and its Prometheus metrics."""

from __future__ import annotations

import time
from typing import Any

from distrun.monitor.state import RankState, RunState, epoch
from distrun.monitor.verify import ordinal

IDLE_PERCENT = 1.0


def snapshot(state: RunState, now: float | None = None, stall_timeout_s: float = 30.0
             ) -> dict[str, Any]:
    now = time.time() if now is None else now
    if state.finished and state.finished.get("time"):
        now = epoch(state.finished["time"]) or now  # a finished run: ages as it ended
    sample = state.last_sample or {}
    procs = sample.get("ranks") or {}
    ranks = [_rank(s, procs.get(str(s.rank)) or {}, now, stall_timeout_s)
             for s in sorted(state.ranks.values(), key=lambda r: r.rank)]
    devices = [_device(d, state) for d in sample.get("devices") or []]
    finished = state.finished or {}
    return {
        "run_dir": str(state.path),
        "time": now,
        "status": finished.get("status", "running" if state.workers_at else "starting"),
        "exitcode": finished.get("exitcode"),
        "world_size": state.plan.get("world_size"),
        "node_rank": state.node_rank,
        "device_type": state.plan.get("device_type"),
        "backend": state.plan.get("backend"),
        "ranks": ranks,
        "devices": devices,
        "devices_unavailable": sample.get("unavailable") or None,
        "sample_age_s": now - sample["time"] if "time" in sample else None,
        "verdict": next((e.get("message") for e in reversed(state.notable)
                         if e.get("event") == "stall_verdict"), None),
        "checks": [{"severity": e.get("severity"), "message": e.get("message")}
                   for e in state.notable if e.get("event") == "verified"],
    }


def _rank(s: RankState, proc: dict[str, Any], now: float, timeout: float) -> dict[str, Any]:
    age = s.age_s(now)
    if s.exited:
        status = "exited"
    elif s.stalled:
        status = "stalled" if s.stalled.get("culprit", True) else "waiting"
    elif age is not None and age > timeout and s.exited is None:
        status = "quiet"
    else:
        status = "running" if s.beat_time else ("joined" if s.joined_at else "starting")
    return {
        "rank": s.rank, "node_rank": s.node_rank, "local_rank": s.local_rank, "host": s.host,
        "pid": s.pid, "device": s.device, "step": s.step,
        "steps_per_second": s.steps_per_s(), "loss": s.metrics.get("loss"),
        "heartbeat_age_s": age, "status": status,
        "cpu_percent": proc.get("cpu_percent"), "rss_bytes": proc.get("rss_bytes"),
    }


def _device(d: dict[str, Any], state: RunState) -> dict[str, Any]:
    """A device sample with the ranks on it: by pid, or by the rank's bound ordinal."""
    pids = set(d.get("pids") or [])
    visible = [int(i) for i in state.node_plan().get("visible_devices", [])]
    ranks = sorted(s.rank for s in state.ranks.values() if s.pid in pids
                   or _physical(visible, ordinal(s)) == d.get("index"))
    util = d.get("utilization_percent")
    idle = (d.get("pids") is not None and not pids) or (util is not None and util < IDLE_PERCENT)
    return {**d, "ranks": ranks, "idle": idle}


def _physical(visible: list[int], index: int | None) -> int | None:
    return visible[index] if index is not None and 0 <= index < len(visible) else None
