"""What a run directory says about a job, read incrementally (see distrun.model.rundir).

Sources: ``plan.json`` (expected ranks), ``events.jsonl`` (launch_started, workers_started,
rank_joined, progress, stalled, rank_exited, job_finished ...), ``heartbeats/rank-<R>``
(``"<unix time> <step>"``, rewritten in place by the rank) and ``samples.jsonl`` (device and
process samples the launcher's watcher records).
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from distrun.model import record
from distrun.model.plan import LaunchPlan, NodePlan
from distrun.model.record import (
    FIRST_ROLE,
    BadLine,
    Event,
    JobFinished,
    LaunchStarted,
    PlanRead,
    Progress,
    RankExited,
    RankJoined,
    SampleLine,
    Stalled,
    WorkersStarted,
    epoch,
    read_plan,
)
from distrun.model.rundir import EVENTS, PLAN, SAMPLES, SUMMARY, RunDirError, read_bytes

__all__ = ["RankState", "RunState", "epoch", "latest_run", "read_heartbeat"]

RATE_WINDOW = 10
# Heartbeat files keep milliseconds, progress events microseconds: over a shorter span the
# rounding alone could make the rate 0 or thousands (steps of microseconds), so none is shown.
RATE_MIN_SPAN_S = 0.1
T = TypeVar("T")


def read_heartbeat(path: Path) -> tuple[float, int] | None:
    """``(time, step)`` of a heartbeat file; None when absent or unreadable. A file that is not
    a regular file raises ``RunDirError`` (never read: a FIFO would block)."""
    try:
        fields = read_bytes(path, limit=128).split()
        when, step = float(fields[0]), int(fields[1])
    except RunDirError:
        raise
    except (OSError, ValueError, IndexError):
        return None
    return (when, step) if math.isfinite(when) else None


@dataclass
class RankState:
    rank: int
    node_rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    device: str | None = None
    started_at: float | None = None
    joined_at: float | None = None
    first_beat: float | None = None
    beat_time: float | None = None
    step: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    rate: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=RATE_WINDOW))
    stalled: Stalled | None = None
    exited: RankExited | None = None

    def steps_per_s(self) -> float | None:
        """Steps per second over the recent (time, step) points: those of the heartbeats this
        reader saw and of the progress events, so one read of a run directory (``monitor
        --json``) gives the same value as a long-running reader (``/metrics``)."""
        reached: dict[int, float] = {}  # step -> the earliest time it was seen
        for when, step in self.rate:
            reached[step] = min(when, reached.get(step, when))
        if len(reached) < 2:
            return None
        s0, s1 = min(reached), max(reached)
        span = reached[s1] - reached[s0]
        return (s1 - s0) / span if span >= RATE_MIN_SPAN_S else None

    def add_point(self, when: float, step: int) -> None:
        if (when, step) not in self.rate:
            self.rate.append((when, step))

    def age_s(self, now: float) -> float | None:
        return now - self.beat_time if self.beat_time is not None else None

    def where(self) -> str:
        node = "?" if self.node_rank is None else self.node_rank
        local = "?" if self.local_rank is None else self.local_rank
        return f"rank {self.rank} (node {node}, local rank {local})"


class RunState:
    """The job as one launcher's run directory shows it; ``refresh()`` reads what is new.

    Corrupted records never raise: a bad line is kept in ``bad`` (file:line and why), a plan
    that does not read back leaves ``plan`` None with ``plan_error`` saying why.
    """

    def __init__(self, path: Path, plan: LaunchPlan | None = None) -> None:
        self.path = path
        read = PlanRead(plan) if plan is not None else read_plan(path / PLAN)
        self.plan: LaunchPlan | None = read.plan
        self.plan_error = read.error
        self.summary: dict[str, Any] = {}
        self.node_rank = 0
        self.launcher_pid: int | None = None
        self.launcher_host: str | None = None
        self.launched_at: float | None = None
        self.workers_at: float | None = None
        self.workers: WorkersStarted | None = None  # the latest (master, ranks)
        self.finished: JobFinished | None = None
        self.ranks: dict[int, RankState] = {r: RankState(r) for r in self.expected()}
        self.notable: list[Event] = []
        self.last_sample: SampleLine | None = None
        self._refused: dict[Path, str] = {}  # heartbeats, summary.json: what is there instead
        self._events = record.events(path / EVENTS)
        self._samples = record.samples(path / SAMPLES)

    @property
    def bad(self) -> list[BadLine]:
        return [*self._events.bad, *self._samples.bad]

    @property
    def refused(self) -> list[str]:
        """Files of the run directory that are not regular files (never read), one line each."""
        tails = [t.refused for t in (self._events, self._samples) if t.refused]
        return [*tails, *self._refused.values()]

    def expected(self) -> list[int]:
        """This node's ranks, from the plan (all of them when the node is unknown)."""
        if self.plan is None:
            return []
        for node in self.plan.nodes:
            if node.node_rank == self.node_rank:
                return list(node.ranks)
        return list(range(self.plan.world_size))

    def node_plan(self) -> NodePlan | None:
        if self.plan is None or not self.plan.nodes:
            return None
        return next((n for n in self.plan.nodes if n.node_rank == self.node_rank),
                    self.plan.nodes[0])

    def visible_devices(self) -> list[int]:
        node = self.node_plan()
        return list(node.visible_devices) if node is not None else []

    def rank(self, rank: int) -> RankState:
        return self.ranks.setdefault(rank, RankState(rank))

    def refresh(self) -> None:
        for event in self._events.read():
            self.apply(event)
        for sample in self._samples.read():
            self.last_sample = sample
        beats = self.path / "heartbeats"
        for state in self.ranks.values():
            hb = self._guarded(read_heartbeat, beats / f"rank-{state.rank}")
            if hb is not None and hb[0] != state.beat_time:
                self._beat(state, *hb)
        if self.finished and not self.summary:
            self.summary = self._guarded(_load, self.path / SUMMARY) or {}

    def _guarded(self, read: Callable[[Path], T], path: Path) -> T | None:
        """``read(path)``; None, and the reason kept in ``refused``, for a file that is not a
        regular file."""
        try:
            value = read(path)
        except RunDirError as exc:
            self._refused[path] = str(exc)
            return None
        self._refused.pop(path, None)
        return value

    def first_failure(self) -> int | None:
        """The rank that failed first: ``summary.json``'s ``first_failure``, else the rank whose
        ``rank_exited`` event says it was the first failure; None when none failed."""
        first = self.summary.get("first_failure")
        if isinstance(first, int) and not isinstance(first, bool):
            return first
        return next((r.rank for r in sorted(self.ranks.values(), key=lambda r: r.rank)
                     if r.exited is not None and r.exited.role == FIRST_ROLE), None)

    def _beat(self, state: RankState, when: float, step: int) -> None:
        state.beat_time, state.step = when, step
        if state.first_beat is None:
            state.first_beat = when
        state.add_point(when, step)

    def apply(self, event: Event) -> None:
        when = event.at
        if isinstance(event, LaunchStarted):
            self.node_rank, self.launched_at = event.node_rank, when
            self.launcher_pid, self.launcher_host = event.pid, event.host
            self.ranks = {r: self.ranks.get(r, RankState(r)) for r in self.expected()}
        elif isinstance(event, WorkersStarted):
            self._on_workers(event, when)
        elif isinstance(event, RankJoined):
            self._on_joined(event, when)
        elif isinstance(event, Progress):
            self._on_progress(event, when)
            return
        elif isinstance(event, Stalled):
            self.rank(event.rank).stalled = event
        elif isinstance(event, RankExited):
            self.rank(event.rank).exited = event
        elif isinstance(event, JobFinished):
            self.finished = event
        self.notable.append(event)

    def _on_workers(self, event: WorkersStarted, when: float | None) -> None:
        self.workers_at, self.workers = when, event
        for rank, place in event.ranks.items():
            state = self.rank(rank)
            state.node_rank, state.local_rank = place.node_rank, place.local_rank
            state.host, state.started_at = place.host, when

    def _on_joined(self, event: RankJoined, when: float | None) -> None:
        state = self.rank(event.rank)
        state.joined_at, state.pid, state.device = when, event.pid, event.device
        for key in ("node_rank", "local_rank", "host"):
            if getattr(event, key) is not None:
                setattr(state, key, getattr(event, key))

    def _on_progress(self, event: Progress, when: float | None) -> None:
        state = self.rank(event.rank)
        state.metrics = event.numbers()
        state.pid = state.pid or event.pid
        if when is not None and event.step is not None:
            state.add_point(when, event.step)
            if state.step is None:
                state.step = event.step


def latest_run(root: Path) -> Path | None:
    """The newest run directory under ``root`` (``./runs`` by default)."""
    try:
        runs = [p for p in root.iterdir() if (p / "events.jsonl").exists()]
    except OSError:
        return None
    return max(runs, key=lambda p: os.path.getmtime(p / "events.jsonl"), default=None)


def _load(path: Path) -> dict[str, Any]:
    """A JSON object file; {} when absent or malformed (``RunDirError`` when not a regular file)."""
    try:
        data = json.loads(read_bytes(path, limit=1 << 20))
    except RunDirError:
        raise
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
