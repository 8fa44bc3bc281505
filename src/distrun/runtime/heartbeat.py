"""Liveness and progress from a rank to its launcher, through the run directory.

Each rank keeps one small file, ``<run>/heartbeats/rank-<R>``, rewritten in place at every
``beat`` (one ``pwrite``: time, step); at most once a second it also appends a ``progress``
event with the metrics to ``events.jsonl`` (one ``O_APPEND`` write, atomic for a line). The
last beat that throttle held back is written at ``close`` and at interpreter exit (stamped with
its own time), so the record ends with the last step's metrics, not those of up to a second
before.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Mapping
from pathlib import Path

from distrun.model import rundir

RECORD_BYTES = 64
EVENT_EVERY_S = 1.0


class Heartbeat:
    def __init__(self, run_dir: str, rank: int) -> None:
        beats = Path(run_dir) / "heartbeats"
        rundir.make_dir(beats)
        self.rank = rank
        self._fd = rundir.open_rewrite(beats / f"rank-{rank}")
        self._events = rundir.open_append(Path(run_dir) / rundir.EVENTS)
        self._next_event = 0.0
        self._held: tuple[float, int, dict[str, float]] | None = None  # (time, step, metrics)
        self._closed = False
        self._pid = os.getpid()  # a forked child that exits does not write its parent's step
        atexit.register(self.flush)

    @classmethod
    def from_env(cls, env: Mapping[str, str], rank: int) -> Heartbeat | None:
        run_dir = env.get("DISTRUN_RUN_DIR")
        return cls(run_dir, rank) if run_dir and os.path.isdir(run_dir) else None

    def beat(self, step: int, metrics: Mapping[str, float]) -> None:
        now = time.time()
        try:
            os.pwrite(self._fd, f"{now:.3f} {step}".ljust(RECORD_BYTES).encode(), 0)
        except OSError as exc:  # a full disk never ends the rank (one warning)
            rundir.spared(exc, f"heartbeats/rank-{self.rank}")
        mono = time.monotonic()
        if mono >= self._next_event:
            self._next_event = mono + EVENT_EVERY_S
            self._held = None
            self.event("progress", step=step, metrics=dict(metrics))
        else:
            self._held = (now, step, dict(metrics))

    def flush(self) -> None:
        """Write the progress of the last beat if the throttle held it back (one write)."""
        held, self._held = self._held, None
        if held is not None and not self._closed and os.getpid() == self._pid:
            when, step, metrics = held
            self._write("progress", {"step": step, "metrics": metrics}, when)

    def event(self, name: str, **fields: object) -> None:
        self._write(name, fields, None)

    def _write(self, name: str, fields: dict[str, object], when: float | None) -> None:
        line = rundir.event_line(name, {"rank": self.rank, "pid": os.getpid(), **fields}, when)
        try:
            os.write(self._events, line)
        except OSError as exc:
            rundir.spared(exc, f"{rundir.EVENTS} ({name} event of rank {self.rank} lost)")

    def joined(self, device: str, local_rank: int, node_rank: int) -> None:
        self.event("rank_joined", device=device, local_rank=local_rank, node_rank=node_rank)

    def close(self) -> None:
        """Flush the held progress and close both files (a second call does nothing)."""
        self.flush()
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.flush)
        for fd in (self._fd, self._events):
            try:
                os.close(fd)
            except OSError:
                continue
