"""What a run directory says about a job, read incrementally (see distrun.launch.rundir).

Sources: ``plan.json`` (expected ranks), ``events.jsonl`` (launch_started, workers_started,
rank_joined, progress, stalled, rank_exited, job_finished ...), ``heartbeats/rank-<R>``
(``"<unix time> <step>"``, rewritten in place by the rank) and ``samples.jsonl`` (device and
process samples the launcher's watcher records).
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

RATE_WINDOW = 10


def epoch(stamp: str | None) -> float | None:
    """An events.jsonl time (``2025-01-01T00:00:00.000000Z``) as a Unix time."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def read_heartbeat(path: Path) -> tuple[float, int] | None:
    try:
        with open(path, "rb") as fh:
            fields = fh.read(128).split()
        return float(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


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
    stalled: dict[str, Any] | None = None
    exited: dict[str, Any] | None = None

    def steps_per_s(self) -> float | None:
        if len(self.rate) < 2:
            return None
        (t0, s0), (t1, s1) = self.rate[0], self.rate[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    def age_s(self, now: float) -> float | None:
        return now - self.beat_time if self.beat_time is not None else None

    def where(self) -> str:
        node = "?" if self.node_rank is None else self.node_rank
        local = "?" if self.local_rank is None else self.local_rank
        return f"rank {self.rank} (node {node}, local rank {local})"


class EventTail:
    """New complete lines of a JSON-lines file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


class RunState:
    """The job as one launcher's run directory shows it; ``refresh()`` reads what is new."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.plan: dict[str, Any] = _load(path / "plan.json")
        self.summary: dict[str, Any] = {}
        self.node_rank = 0
        self.launched_at: float | None = None
        self.workers_at: float | None = None
        self.workers: dict[str, Any] = {}  # the latest workers_started event (master, ranks)
        self.finished: dict[str, Any] | None = None
        self.ranks: dict[int, RankState] = {r: RankState(r) for r in self.expected()}
        self.notable: list[dict[str, Any]] = []
        self.last_sample: dict[str, Any] | None = None
        self._events = EventTail(path / "events.jsonl")
        self._samples = EventTail(path / "samples.jsonl")

    def expected(self) -> list[int]:
        """This node's ranks, from the plan (all of them when the node is unknown)."""
        nodes = self.plan.get("nodes") or []
        for node in nodes:
            if node.get("node_rank") == getattr(self, "node_rank", 0):
                return [int(r) for r in node.get("ranks", [])]
        return list(range(int(self.plan.get("world_size", 0))))

    def node_plan(self) -> dict[str, Any]:
        nodes = self.plan.get("nodes") or [{}]
        return next((n for n in nodes if n.get("node_rank") == self.node_rank), nodes[0])

    def rank(self, rank: int) -> RankState:
        return self.ranks.setdefault(rank, RankState(rank))

    def refresh(self) -> None:
        for event in self._events.read():
            self.apply(event)
        for sample in self._samples.read():
            self.last_sample = sample
        beats = self.path / "heartbeats"
        for state in self.ranks.values():
            hb = read_heartbeat(beats / f"rank-{state.rank}")
            if hb is not None and hb[0] != state.beat_time:
                self._beat(state, *hb)
        if self.finished and not self.summary:
            self.summary = _load(self.path / "summary.json")

    def _beat(self, state: RankState, when: float, step: int) -> None:
        state.beat_time, state.step = when, step
        if state.first_beat is None:
            state.first_beat = when
        state.rate.append((when, step))

    def apply(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        when = epoch(event.get("time"))
        handler = _HANDLERS.get(str(name))
        if handler is not None:
            handler(self, event, when)
        if name not in ("progress",):
            self.notable.append(event)

    def _on_launch(self, event: dict[str, Any], when: float | None) -> None:
        self.node_rank = int(event.get("node_rank", 0))
        self.launched_at = when
        self.ranks = {r: self.ranks.get(r, RankState(r)) for r in self.expected()}

    def _on_workers(self, event: dict[str, Any], when: float | None) -> None:
        self.workers_at, self.workers = when, event
        for key, info in (event.get("ranks") or {}).items():
            state = self.rank(int(key))
            state.node_rank, state.local_rank = info.get("node_rank"), info.get("local_rank")
            state.host, state.started_at = info.get("host"), when

    def _on_joined(self, event: dict[str, Any], when: float | None) -> None:
        state = self.rank(int(event["rank"]))
        state.joined_at, state.pid, state.device = when, event.get("pid"), event.get("device")
        for key in ("node_rank", "local_rank", "host"):
            if event.get(key) is not None:
                setattr(state, key, event[key])

    def _on_progress(self, event: dict[str, Any], when: float | None) -> None:
        state = self.rank(int(event["rank"]))
        state.metrics = {k: v for k, v in (event.get("metrics") or {}).items()
                         if isinstance(v, int | float)}
        state.pid = state.pid or event.get("pid")
        if when is not None and event.get("step") is not None and state.step is None:
            state.step = int(event["step"])

    def _on_stalled(self, event: dict[str, Any], when: float | None) -> None:
        self.rank(int(event["rank"])).stalled = event

    def _on_exited(self, event: dict[str, Any], when: float | None) -> None:
        self.rank(int(event["rank"])).exited = event

    def _on_finished(self, event: dict[str, Any], when: float | None) -> None:
        self.finished = event


_HANDLERS = {
    "launch_started": RunState._on_launch,
    "workers_started": RunState._on_workers,
    "rank_joined": RunState._on_joined,
    "progress": RunState._on_progress,
    "stalled": RunState._on_stalled,
    "rank_exited": RunState._on_exited,
    "job_finished": RunState._on_finished,
}


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def latest_run(root: Path) -> Path | None:
    """The newest run directory under ``root`` (``./runs`` by default)."""
    try:
        runs = [p for p in root.iterdir() if (p / "events.jsonl").exists()]
    except OSError:
        return None
    return max(runs, key=lambda p: os.path.getmtime(p / "events.jsonl"), default=None)
