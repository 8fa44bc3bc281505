"""The launcher's loop over the ranks' progress files (docs/instrument.md): the join proof
and the hang verdict, once a second, beside the heartbeat watcher.

Reads ``<run>/progress/rank-<R>.json`` (written by :mod:`distrun.instrument`) and samples the
ranks' processes (psutil: alive, CPU%); decides with :func:`distrun.monitor.hang.hang_verdict`;
acts: prints, records (event ``hang``, ``hang.json`` with the waiting graph and the stacks),
and stops the job only when waiting cannot succeed (mismatch, gone), when the backend's own
timeout is about to fire, or after ``--stall-timeout`` seconds when the user gave one.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from distrun.model.progress import RankProgress, parse
from distrun.monitor import stall
from distrun.monitor.hang import HANG_AFTER_S, HangVerdict, Kind, RankHealth, hang_verdict
from distrun.monitor.procs import ProcSampler
from distrun.monitor.state import RankState

PROGRESS_DIR = "progress"  # the same folder as distrun.instrument.PROGRESS_DIR
BACKEND_TIMEOUT_MARGIN_S = 5.0  # stop this long before the backend's own timeout fires
GONE_DESCRIBE_WAIT_S = 5.0  # a rank gone: wait this long for the waiters' op and sizes
PROOF_WINDOW_S = 3.0  # CPU use measured over this long after every rank joined
CPU_TICKS = 5  # the verdict judges a culprit's CPU use over the last few ticks
BUSY_PERCENT = 1.0


class Record(Protocol):
    path: Path
    logs: Path

    def event(self, name: str, **fields: Any) -> None: ...

    def write_json(self, name: str, data: Any) -> None: ...


@dataclass(frozen=True)
class HangConfig:
    interval_s: float = 1.0
    hang_after_s: float = HANG_AFTER_S
    stall_timeout_s: float | None = None  # given by the user: stop after this long stuck
    action: str = "stop"  # "warn": never stop the job
    join_timeout_s: float = 60.0


@dataclass
class Stopped:
    verdict: HangVerdict
    message: str


def read_states(folder: Path) -> dict[int, RankProgress]:
    out: dict[int, RankProgress] = {}
    if not folder.is_dir() or folder.is_symlink():
        return out
    for path in folder.glob("rank-*.json"):
        try:
            state = parse(path.read_text(encoding="utf-8"))
        except OSError:
            continue
        if state is not None:
            out[state.rank] = state
    return out


@dataclass(frozen=True)
class Proof:
    severity: str
    message: str


def proof(states: Mapping[int, RankProgress], expected: Sequence[int],
          cpu: Mapping[int, float | None]) -> Proof:
    """The positive proof after start: joined, each on its own device/process, busy."""
    joined = [r for r in expected if r in states and states[r].joined_at is not None]
    n = len(expected)
    count = f"{len(joined)}/{n} ranks joined"
    if len(joined) < n:
        missing = ", ".join(str(r) for r in expected if r not in joined)
        return Proof("warning", f"{count}; rank(s) {missing} created no process group")
    devices = {r: states[r].device for r in joined}
    on_cpu = all(d in ("", "cpu") for d in devices.values())
    taken: dict[tuple[str, str], int] = {}
    for r, d in sorted(devices.items()):
        other = taken.setdefault((states[r].host, d), r)
        if not on_cpu and d and other != r:
            return Proof("error", f"{count}, but ranks {other} and {r} share {d} on "
                         f"{states[r].host}: each rank needs its own device")
    busy = [r for r in joined if (cpu.get(r) or 0.0) >= BUSY_PERCENT]
    idle = [r for r in joined if r not in busy]
    unit = "processes" if on_cpu else "ranks' processes"
    own = ("each its own process (CPU)" if on_cpu
           else f"each on its own device ({', '.join(devices[r] or '?' for r in joined)})")
    text = f"{count}, {own}, {len(busy)}/{n} {unit} busy"
    if idle:
        return Proof("warning", text + f"; idle: rank(s) {', '.join(map(str, idle))}")
    return Proof("ok", text)


@dataclass
class _Memory:
    said: set[tuple[Any, ...]] = field(default_factory=set)
    current: HangVerdict | None = None
    all_joined_at: float | None = None
    proved: bool = False
    cpu_sum: dict[int, float] = field(default_factory=dict)
    cpu_n: dict[int, int] = field(default_factory=dict)
    recent: dict[int, deque[float]] = field(default_factory=dict)


class HangWatch(threading.Thread):
    def __init__(self, run: Record, expected: Sequence[int], config: HangConfig, *,
                 stop_job: Callable[[list[int]], None], out: TextIO | None = None,
                 started_at: float | None = None) -> None:
        super().__init__(name="distrun-hangwatch", daemon=True)
        self.run_dir, self.expected, self.config = run, list(expected), config
        self.stop_job, self.out = stop_job, out or sys.stderr
        self.started_at = started_at or time.time()
        self.stopped: Stopped | None = None
        self.procs = ProcSampler()
        self._halt = threading.Event()
        self._m = _Memory()

    def run(self) -> None:
        while not self._halt.wait(self.config.interval_s):
            try:
                self.tick(time.time())
            except Exception as exc:  # the watch must never take the job down
                self.say(f"distrun: hang watch: {type(exc).__name__}: {exc}")
                self.run_dir.event("monitor_error", error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> Stopped | None:
        """End the loop; one last look at what the ranks left (a rank that left early)."""
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=15)
        try:
            self.tick(time.time(), final=True)
        except Exception as exc:
            self.say(f"distrun: hang watch: {type(exc).__name__}: {exc}")
        return self.stopped

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def tick(self, now: float, final: bool = False) -> None:
        states = read_states(self.run_dir.path / PROGRESS_DIR)
        health = self._health(states, final)
        self._prove(now, states, health, final)
        if self.stopped is not None:
            return
        verdict = hang_verdict(states, health, now, self.expected,
                               hang_after_s=self.config.hang_after_s)
        self._resolved(now, verdict, final)
        if verdict is not None:
            self._act(verdict, states, final)

    def _health(self, states: Mapping[int, RankProgress], final: bool) -> dict[int, RankHealth]:
        if final:
            return {r: RankHealth(alive=False) for r in self.expected}
        pids = {r: s.pid for r, s in states.items()}
        samples = self.procs.read(list(pids.values()))
        out = {}
        for r, pid in pids.items():
            sample, recent = samples[pid], self._m.recent.setdefault(r, deque(maxlen=CPU_TICKS))
            if sample.cpu_percent is not None:
                recent.append(sample.cpu_percent)
                self._m.cpu_sum[r] = self._m.cpu_sum.get(r, 0.0) + sample.cpu_percent
                self._m.cpu_n[r] = self._m.cpu_n.get(r, 0) + 1
            mean = sum(recent) / len(recent) if recent else None
            out[r] = RankHealth(sample.alive, mean)
        return out

    def _prove(self, now: float, states: Mapping[int, RankProgress],
               health: Mapping[int, RankHealth], final: bool) -> None:
        m = self._m
        if m.proved:
            return
        joined = all(r in states and states[r].joined_at is not None for r in self.expected)
        if joined and m.all_joined_at is None:
            m.all_joined_at, m.cpu_sum, m.cpu_n = now, {}, {}
        waited = now - self.started_at > self.config.join_timeout_s
        window = m.all_joined_at is not None and now - m.all_joined_at >= PROOF_WINDOW_S
        if not (window or waited or (final and states)):
            return
        m.proved = True
        cpu = {r: m.cpu_sum[r] / m.cpu_n[r] for r in m.cpu_n}
        found = proof(states, self.expected, cpu)
        if final and not window and found.severity == "ok":
            found = Proof("ok", found.message.split(", each")[0] + ", each its own process "
                          "(the job ended before its activity could be sampled)")
        if not states and not final:
            found = Proof("info", f"no rank created a process group within "
                          f"{self.config.join_timeout_s:g} s (the script does not use "
                          "torch.distributed yet)")
        tag = {"ok": "ok", "info": "note"}.get(found.severity, found.severity.upper())
        self.say(f"distrun: verify: {tag}: {found.message}")
        self.run_dir.event("verified", check="joined", severity=found.severity,
                           message=found.message, source="process-group")

    def _resolved(self, now: float, verdict: HangVerdict | None, final: bool) -> None:
        old = self._m.current
        if (old is not None and old.key in self._m.said and not final
                and (verdict is None or verdict.key != old.key)):
            self.say(f"distrun: hang resolved: {_ranks(old.culprits)} caught up and "
                     f"{old.collective()} went on")
            self.run_dir.event("hang_resolved", culprits=list(old.culprits), pg=old.pg,
                               seq=old.seq)
        self._m.current = verdict

    def _act(self, verdict: HangVerdict, states: Mapping[int, RankProgress],
             final: bool) -> None:
        if verdict.kind is Kind.GONE and not verdict.op and not final and (
                verdict.waited_s < GONE_DESCRIBE_WAIT_S):
            return  # the waiters' op lands in a few seconds (or at their exit): name it then
        stop, why = self._should_stop(verdict)
        if verdict.key not in self._m.said:
            self._m.said.add(verdict.key)
            self._announce(verdict, states, "" if final else why)
        if stop and not final:
            self._halt_job(verdict, why)

    def _should_stop(self, v: HangVerdict) -> tuple[bool, str]:
        timeout = self.config.stall_timeout_s
        if v.must_stop:
            why = "waiting cannot succeed"
        elif timeout is not None and v.waited_s >= timeout:
            why = f"no progress for {v.waited_s:.0f} s (--stall-timeout {timeout:g})"
        elif v.timeout_s and v.waited_s >= v.timeout_s - BACKEND_TIMEOUT_MARGIN_S:
            why = f"the backend's own timeout ({v.timeout_s:g} s) is about to fire"
        else:
            return False, ""
        return self.config.action == "stop", why

    def _announce(self, v: HangVerdict, states: Mapping[int, RankProgress], why: str) -> None:
        alive = [RankState(rank=r, pid=states[r].pid) for r in v.culprits
                 if r in states and states[r].exited_at is None]
        stacks = stall.dump_stacks(alive, self.run_dir.logs) if alive else {}
        self.say(f"distrun: HANG (kind {int(v.kind)}, {v.kind.label}): {v.message()}")
        for rank, stack in sorted(stacks.items()):
            self.say(f"distrun: stack of rank {rank} ({stack.method}):")
            for line in stack.text.splitlines()[:24]:
                self.say(f"    {line}")
        self.say("distrun: " + self._plan(v, why))
        record = {**v.to_json(), "time": time.time(),
                  "stacks": {str(r): {"method": s.method, "text": s.text[-8000:]}
                             for r, s in stacks.items()},
                  "progress": {str(r): s.to_json() for r, s in sorted(states.items())}}
        self.run_dir.event("hang", **{k: record[k] for k in (
            "kind", "kind_number", "culprits", "waiting", "collective", "waited_s",
            "message", "waiting_graph")}, stack_methods={r: s.method for r, s in stacks.items()})
        self.run_dir.write_json("hang.json", record)

    def _plan(self, v: HangVerdict, why: str) -> str:
        if not why and v.must_stop:
            return "found after the job ended"
        if self.config.action != "stop":
            return "--stall-action warn: the job keeps running"
        if v.must_stop:
            return f"{why}: stopping the job"
        limits = []
        if v.timeout_s:
            limits.append(f"the backend's timeout ({v.timeout_s:g} s) would fire")
        if self.config.stall_timeout_s is not None:
            limits.append(f"after --stall-timeout {self.config.stall_timeout_s:g} s")
        stop = " or ".join(limits) if limits else "never (no timeout known)"
        return (f"the job keeps running (waiting may still succeed); distrun stops it only "
                f"when {stop}; pass --stall-timeout SECONDS to stop sooner")

    def _halt_job(self, v: HangVerdict, why: str) -> None:
        message = f"{v.message()}; {why}: distrun stopped the job"
        self.stopped = Stopped(v, message)
        self.say(f"distrun: stopping the job: {why}")
        self.run_dir.event("hang_stop", culprits=list(v.culprits), reason=why)
        states = read_states(self.run_dir.path / PROGRESS_DIR)
        self.stop_job([s.pid for s in states.values()])


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
