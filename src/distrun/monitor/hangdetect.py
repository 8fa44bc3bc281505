"""The detectors of an instrumented run (docs/instrument.md): the join proof and the hang
verdict, two entries in the watcher's one loop (``distrun.monitor.watcher``).

The loop reads ``<run>/progress/rank-<R>.json`` (written by :mod:`distrun.instrument`) with
:func:`read_states` and samples the ranks' processes; both arrive in the ``Tick``
(``tick.progress``, ``tick.procs``). The detectors decide with
:func:`distrun.monitor.hang.hang_verdict` and :func:`proof` and return what to do:

* :class:`ProofDetector`: the positive proof after start, a ``Finding`` (``distrun: verify:
  ok: N/N ranks joined, ...``);
* :class:`HangDetector`: a ``Notice`` naming a hang (``distrun: HANG (kind N, ...)``, the
  culprits' stacks through ``tick.stacks``, the event ``hang`` and ``hang.json``), a
  ``Notice`` when it resolved, and a stopping ``Verdict`` only when waiting cannot succeed
  (mismatch, gone), when the backend's own timeout is about to fire, or after
  ``--stall-timeout`` seconds when the user gave one; ``--stall-action warn`` never stops.

They remember what they said between ticks (small objects with ``__call__``) but do no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrun.model.findings import Finding, Severity
from distrun.model.progress import RankProgress, parse
from distrun.monitor import verify
from distrun.monitor.detectors import Detector, Notice, Result, Tick, Verdict
from distrun.monitor.hang import (
    HANG_AFTER_S,
    HangVerdict,
    Kind,
    RankHealth,
    hang_verdict,
    ranks_phrase,
)
from distrun.monitor.quiet import QUIET_AFTER_S, QuietVerdict, quiet_verdict
from distrun.monitor.stall import Stack
from distrun.monitor.state import RankState

PROGRESS_DIR = "progress"  # the same folder as distrun.instrument.PROGRESS_DIR
BACKEND_TIMEOUT_MARGIN_S = 5.0  # stop this long before the backend's own timeout fires
GONE_DESCRIBE_WAIT_S = 5.0  # a rank gone: wait this long for the waiters' op and sizes
# A rank gone with an error is torchelastic's to report (it stops the others and names the
# failure within a second or two); distrun stops the job itself only when the rank left and
# nothing else ends the wait: a rank that exited 0 early.
GONE_STOP_AFTER_S = 10.0
PROOF_WINDOW_S = 3.0  # the proof comes this long after every rank joined, at the earliest
PROOF_IDLE_S = 30.0  # a rank not seen working this long after the join is named idle
CPU_TICKS = 5  # the verdict judges a culprit's CPU use over the last few ticks
BUSY_PERCENT = 1.0


@dataclass(frozen=True)
class HangConfig:
    hang_after_s: float = HANG_AFTER_S
    stall_timeout_s: float | None = None  # given by the user: stop after this long stuck
    action: str = "stop"  # "warn": never stop the job
    join_timeout_s: float = 60.0
    quiet_after_s: float = QUIET_AFTER_S  # every rank idle, nothing progressed: name it

    @property
    def quiet_s(self) -> float:
        """A quiet job is named after this long; sooner when --stall-timeout is shorter."""
        timeout = self.stall_timeout_s
        return min(self.quiet_after_s, timeout) if timeout is not None else self.quiet_after_s


def read_states(folder: Path) -> dict[int, RankProgress]:
    """The ranks' progress files (an effect: the loop calls it, detectors get the values)."""
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


def proof(states: Mapping[int, RankProgress], expected: Sequence[int],
          cpu: Mapping[int, float | None] | None) -> Finding:
    """The positive proof after start: joined, each on its own device/process, busy.
    ``cpu`` is None when the job ended before its activity could be sampled over the proof
    window: then no rank is called idle (a rank in its exit path uses no CPU)."""
    joined = [r for r in expected if r in states and states[r].joined_at is not None]
    n = len(expected)
    count = f"{len(joined)}/{n} ranks joined"
    if len(joined) < n:
        missing = ", ".join(str(r) for r in expected if r not in joined)
        return _joined("warning", f"{count}; rank(s) {missing} created no process group")
    devices = {r: states[r].device for r in joined}
    on_cpu = all(d.split(":")[0] in ("", "cpu") for d in devices.values())  # JAX: cpu:0
    taken: dict[tuple[str, str], int] = {}
    for r, d in sorted(devices.items()):
        other = taken.setdefault((states[r].host, d), r)
        if not on_cpu and d and other != r:
            return _joined("error", f"{count}, but ranks {other} and {r} share {d} on "
                           f"{states[r].host}: each rank needs its own device")
    own = ("each its own process (CPU)" if on_cpu
           else f"each on its own device ({', '.join(devices[r] or '?' for r in joined)})")
    if cpu is None:
        own = own.replace(" (CPU)", "")
        return _joined("ok", f"{count}, {own} (the job ended before its activity could be "
                       "sampled)")
    busy = [r for r in joined if (cpu.get(r) or 0.0) >= BUSY_PERCENT]
    idle = [r for r in joined if r not in busy]
    unit = "processes" if on_cpu else "ranks' processes"
    text = f"{count}, {own}, {len(busy)}/{n} {unit} busy"
    if idle:
        return _joined("warning", text + f"; idle: rank(s) {', '.join(map(str, idle))}")
    return _joined("ok", text)


def _joined(severity: Severity, message: str) -> Finding:
    return verify.finding("joined", severity, message)


def _cpu(t: Tick, state: RankProgress) -> float | None:
    """The rank's CPU this tick, its child processes' included (DataLoader workers)."""
    sample = t.procs.get(state.pid)
    return sample.work_percent if sample is not None else None


def joined_by_init(ranks: Mapping[int, RankState]) -> dict[int, RankProgress]:
    """The ranks that joined through ``distrun.init()`` (its ``rank_joined`` event), as
    progress without collectives: the join of a job that makes no torch process group (JAX),
    where the proof has no progress file to read."""
    return {r: RankProgress(rank=r, pid=s.pid or 0, host=s.host or "", device=s.device or "",
                            joined_at=s.joined_at)
            for r, s in ranks.items() if s.joined_at is not None and s.pid}


@dataclass
class ProofDetector:
    """Once: every rank joined its process group, each on its own device, working.

    A rank works when it was seen using CPU or making progress (a collective, a p2p op, a
    step) after every rank joined. The line comes as soon as every rank was seen working,
    ``PROOF_WINDOW_S`` after the join at the earliest; a rank never seen working is named idle
    only after ``PROOF_IDLE_S``: setup waits (a JIT build's lock, a compiler, the first batch)
    are not idleness."""

    expected: list[int]
    config: HangConfig = field(default_factory=HangConfig)
    sees_final: bool = True
    started_at: float | None = None
    all_joined_at: float | None = None
    proved: bool = False
    at_join: dict[int, tuple[int, ...]] = field(default_factory=dict)
    working: set[int] = field(default_factory=set)

    def __call__(self, t: Tick) -> list[Result]:
        if self.proved:
            return []
        self.started_at = self.started_at or t.state.launched_at or t.now
        states = t.progress or joined_by_init(t.state.ranks)
        joined = all(r in states and states[r].joined_at is not None for r in self.expected)
        if joined and self.all_joined_at is None:
            self.all_joined_at = t.now
            self.at_join = {r: _moves(t, s) for r, s in states.items()}
        elif self.all_joined_at is not None and not t.final:
            self.working |= {r for r, s in states.items()
                             if (_cpu(t, s) or 0.0) >= BUSY_PERCENT
                             or _moves(t, s) != self.at_join.get(r)}
        if self.all_joined_at is None:
            waited = t.now - self.started_at > self.config.join_timeout_s
            return self._say(t, states, None) if waited or (t.final and states) else []
        since = t.now - self.all_joined_at
        all_working = self.working >= set(self.expected)
        if (since >= PROOF_WINDOW_S and all_working) or since >= PROOF_IDLE_S:
            return self._say(t, states, self._busy())
        if not t.final:
            return []
        return self._say(t, states, self._busy() if all_working else None)

    def _busy(self) -> dict[int, float | None]:
        return {r: 100.0 if r in self.working else 0.0 for r in self.expected}

    def _say(self, t: Tick, states: Mapping[int, RankProgress],
             cpu: dict[int, float | None] | None) -> list[Result]:
        self.proved = True
        if not states and not t.final:
            return [_joined("info", f"no rank created a process group within "
                            f"{self.config.join_timeout_s:g} s (the script does not use "
                            "torch.distributed yet)")]
        return [proof(states, self.expected, cpu)]


def _moves(t: Tick, state: RankProgress) -> tuple[int, ...]:
    """What grows while a rank works: collectives completed, p2p ops entered, its step."""
    p2p = state.p2p
    beat = t.state.ranks.get(state.rank)
    return (sum(g.completed for g in state.groups.values()),
            sum(p2p.sent.values()) + sum(p2p.received.values()) if p2p is not None else 0,
            beat.step if beat is not None and beat.step is not None else -1)


@dataclass
class HangDetector:
    """Names every hang once (kind, culprits, stacks), says when it resolved, and stops the
    job only when waiting cannot succeed or a timeout says so."""

    expected: list[int]
    config: HangConfig = field(default_factory=HangConfig)
    sees_final: bool = True
    said: set[tuple[Any, ...]] = field(default_factory=set)
    current: HangVerdict | QuietVerdict | None = None
    stopped: bool = False
    recent: dict[int, deque[float]] = field(default_factory=dict)
    gone_since: dict[tuple[Any, ...], float] = field(default_factory=dict)  # key -> first seen

    def __call__(self, t: Tick) -> list[Result]:
        health = self._health(t)
        if self.stopped:
            return []
        verdict: HangVerdict | QuietVerdict | None = hang_verdict(
            t.progress, health, t.now, self.expected, hang_after_s=self.config.hang_after_s)
        if verdict is None and not t.final:
            beats = {r: s.beat_time for r, s in t.state.ranks.items()}
            verdict = quiet_verdict(t.progress, health, beats, t.now, self.expected,
                                    after_s=self.config.quiet_s)
        out = self._resolved(verdict, t.final, t.progress)
        self.current = verdict
        if verdict is not None:
            out += self._act(t, verdict)
        return out

    def _health(self, t: Tick) -> dict[int, RankHealth]:
        if t.final:
            return {r: RankHealth(alive=False) for r in self.expected}
        out = {}
        for rank, state in t.progress.items():
            sample = t.procs.get(state.pid)
            recent = self.recent.setdefault(rank, deque(maxlen=CPU_TICKS))
            work = _cpu(t, state)
            if work is not None:
                recent.append(work)
            mean = sum(recent) / len(recent) if recent else None
            out[rank] = RankHealth(sample.alive if sample is not None else True, mean)
        return out

    def _resolved(self, verdict: HangVerdict | QuietVerdict | None, final: bool,
                  progress: Mapping[int, RankProgress]) -> list[Result]:
        old = self.current
        if (old is None or old.key not in self.said
                or (verdict is not None and verdict.key == old.key)):
            return []
        if final and not went_on(old, progress):
            return []  # every rank is gone by now: only their progress files can tell
        where = ({"pg": old.pg, "seq": old.seq} if isinstance(old, HangVerdict)
                 else {"quiet": True})
        return [Notice((f"distrun: hang resolved: {old.resolved()}",),
                       (("hang_resolved", {"culprits": list(old.culprits), **where}),),
                       closes=True)]

    def _act(self, t: Tick, verdict: HangVerdict | QuietVerdict) -> list[Result]:
        if isinstance(verdict, HangVerdict) and verdict.kind is Kind.GONE and not verdict.op \
                and not t.final and verdict.waited_s < GONE_DESCRIBE_WAIT_S:
            return []  # the waiters' op lands in a few seconds (or at their exit): name it then
        gone_for = (t.now - self.gone_since.setdefault(verdict.key, t.now)
                    if verdict.kind is Kind.GONE else None)
        stop, why = should_stop(verdict, self.config, gone_for)
        out: list[Result] = []
        if verdict.key not in self.said:
            self.said.add(verdict.key)
            out.append(announce(t, verdict, self.config, "" if t.final else why))
        if stop and not t.final:
            self.stopped = True
            out.append(Verdict(
                list(verdict.culprits), f"{verdict.message()}; {why}: distrun stopped the job",
                True, "HANG", (("hang_stop", {"culprits": list(verdict.culprits),
                                              "reason": why}),),
                announce=(f"distrun: stopping the job: {why}",)))
        return out


def went_on(v: HangVerdict | QuietVerdict, progress: Mapping[int, RankProgress]) -> bool:
    """Whether every rank of a collective hang completed that collective (the progress files
    say so after the job ended, when no rank is alive to compare verdicts with)."""
    if not isinstance(v, HangVerdict) or v.p2p is not None:
        return False
    groups = [progress[r].groups.get(v.pg) if r in progress else None
              for r in v.culprits + v.waiting]
    return all(g is not None and g.completed >= v.seq for g in groups)


def should_stop(v: HangVerdict | QuietVerdict, config: HangConfig,
                gone_for_s: float | None = None) -> tuple[bool, str]:
    """Whether to stop the job for this hang, and why. ``gone_for_s``: how long the detector
    has seen this rank gone (the waiters may have waited longer than that)."""
    timeout = config.stall_timeout_s
    gone = v.waited_s if gone_for_s is None else gone_for_s
    if v.kind is Kind.GONE and gone < GONE_STOP_AFTER_S:
        return False, ""  # torchelastic reports a failed rank first; stop only if it does not
    if v.must_stop:
        why = "waiting cannot succeed"
    elif timeout is not None and v.waited_s >= timeout:
        floor = (f"; a hang inside torch.distributed is judged after {config.hang_after_s:g} s "
                 "at the earliest" if isinstance(v, HangVerdict)
                 and timeout < config.hang_after_s else "")
        why = f"no progress for {v.waited_s:.0f} s (--stall-timeout {timeout:g}{floor})"
    elif v.timeout_s and v.waited_s >= v.timeout_s - BACKEND_TIMEOUT_MARGIN_S:
        why = f"the backend's own timeout ({v.timeout_s:g} s) is about to fire"
    else:
        return False, ""
    return config.action == "stop", why


def announce(t: Tick, v: HangVerdict | QuietVerdict, config: HangConfig, why: str) -> Notice:
    """The HANG line, each culprit's stack, what distrun does; the ``hang`` event and
    ``hang.json`` (the waiting graph, the stacks, the progress files)."""
    states = t.progress
    alive = [RankState(rank=r, pid=states[r].pid) for r in v.culprits
             if r in states and states[r].exited_at is None]
    stacks = t.stacks(alive) if alive else {}
    named = f"HANG (kind {int(v.kind)}, {v.kind.label}): {v.message()}"
    lines = [f"distrun: {named}"]
    for rank, stack in sorted(stacks.items()):
        lines.append(f"distrun: stack of rank {rank} ({stack.method}):")
        lines += [f"    {line}" for line in stack.shown().splitlines()[:24]]
        if stack.hint():
            lines.append(f"distrun: rank {rank} {stack.hint()}")
    plan = _plan(v, config, why)
    lines += [f"distrun: {plan}"] if plan else []
    record = {**v.to_json(), "time": t.now,
              "stacks": {str(r): {"method": s.method, "text": s.text[-8000:]}
                         for r, s in stacks.items()},
              "progress": {str(r): s.to_json() for r, s in sorted(states.items())}}
    event = {k: record[k] for k in ("kind", "kind_number", "culprits", "waiting", "collective",
                                    "waited_s", "message", "waiting_graph")}
    event["stack_methods"] = {r: s.method for r, s in stacks.items()}
    said = _hints(stacks)
    if said:  # in the record too: diagnose and the report quote the event's message
        record["hints"] = event["hints"] = said
        event["message"] = f"{event['message']}; {'; '.join(said)}"
    return Notice(tuple(lines), (("hang", event),), (("hang.json", record),), opens=named)


def _hints(stacks: Mapping[int, Stack]) -> list[str]:
    """Each known wait the culprits' stacks show, once, with the ranks it holds."""
    held: dict[str, list[int]] = {}
    for rank, stack in sorted(stacks.items()):
        if stack.hint():
            held.setdefault(stack.hint(), []).append(rank)
    return [f"{ranks_phrase(ranks)}: {hint}" for hint, ranks in held.items()]


def _plan(v: HangVerdict | QuietVerdict, config: HangConfig, why: str) -> str:
    """What distrun does about it; "" when the stop follows (its own line says why)."""
    if not why and v.must_stop:
        return "found after the job ended"
    if config.action != "stop":
        return "--stall-action warn: the job keeps running"
    if why:
        return ""
    limits = []
    if v.timeout_s:
        limits.append(f"the backend's timeout ({v.timeout_s:g} s) would fire")
    if config.stall_timeout_s is not None:
        limits.append(f"after --stall-timeout {config.stall_timeout_s:g} s")
    if not limits:
        return ("the job keeps running (waiting may still succeed; no timeout known); pass "
                "--stall-timeout SECONDS to stop it")
    return (f"the job keeps running (waiting may still succeed); distrun stops it only "
            f"when {' or '.join(limits)}; pass --stall-timeout SECONDS to stop sooner")


def hang_detectors(expected: Sequence[int], config: HangConfig) -> list[Detector]:
    """The instrumented run's detectors, in the order they run: the proof, then the hang."""
    return [ProofDetector(list(expected), config), HangDetector(list(expected), config)]
