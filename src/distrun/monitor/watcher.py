"""The launcher's watcher thread: one loop over pure detectors, acting through injected actions.

Started by ``distrun.launch.launcher.launch`` around torchrun with the plan object and a
``LauncherActions`` (record an event, say a line, stop the job). Each tick the loop reads what
is new in the run directory (and, on an instrumented run, the ranks' progress files), samples
this node's devices and rank processes (written to ``samples.jsonl``), builds a ``Tick`` and
runs every detector of its registry in order (``distrun.monitor.detectors``: join, activity,
lost node, stall, and any ``extra_detectors`` such as the join proof and hang detector of
``distrun.monitor.hangdetect``); the findings, notices and verdicts they return are the only
things it acts on. When the job ended, ``stop`` gives the detectors that ask for it one last
``final`` tick (a rank that left early is named then). Once a stop signal reached the launcher
(``interrupted``: Ctrl-C, a scheduler's SIGTERM; not distrun's own stop), the ranks end because
of it: the loop judges nothing more, not even the final tick, and ``ongoing`` keeps the hang
that was in progress before it, as it was named. The detector protocol,
``Detector = Callable[[Tick], Sequence[Finding | Notice | Verdict]]``, is documented there: a
new detector is one more entry in the list, not a change to this loop.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Protocol, TextIO

from distrun.model.findings import Finding
from distrun.model.plan import LaunchPlan
from distrun.model.progress import RankProgress
from distrun.model.rundir import SAMPLES, RunDir
from distrun.model.terminal import to_console
from distrun.monitor import stall
from distrun.monitor.detectors import (
    FINAL_ATTR,
    Detector,
    Notice,
    Tick,
    Verdict,
    WatchConfig,
    default_detectors,
)
from distrun.monitor.devices import Sampler, for_vendor
from distrun.monitor.hangdetect import PROGRESS_DIR, read_states
from distrun.monitor.nodewatch import NodeWatch
from distrun.monitor.procs import ProcSampler, rank_pids
from distrun.monitor.samples import DeviceReading, ProcSample
from distrun.monitor.state import RankState, RunState

__all__ = ["Actions", "LauncherActions", "Verdict", "WatchConfig", "Watcher", "watch"]


class Actions(Protocol):
    """What the watcher may do to the world; launch injects it (tests inject their own)."""

    def record(self, name: str, **fields: Any) -> None: ...
    def say(self, text: str) -> None: ...
    def write_json(self, name: str, data: Any) -> None: ...
    def stop(self, pids: list[int]) -> None: ...


class LauncherActions:
    """Events and JSON files into the run directory, lines on the console, SIGTERM to stop
    the job."""

    def __init__(self, run: RunDir, out: TextIO | None = None,
                 launcher_pid: int | None = None) -> None:
        self.run = run
        self.out: IO[str] | None = out or sys.stderr  # None once the console went away
        self.launcher_pid = launcher_pid or os.getpid()

    def record(self, name: str, **fields: Any) -> None:
        self.run.event(name, **fields)

    def say(self, text: str) -> None:
        """A line on the console; a console gone (a hung-up terminal) loses nothing else."""
        self.out = to_console(self.out, text + "\n")

    def write_json(self, name: str, data: Any) -> None:
        self.run.write_json(name, data)

    def stop(self, pids: list[int]) -> None:
        """SIGTERM to the launcher: torchelastic's handler stops the workers (then SIGKILL)."""
        if callable(signal.getsignal(signal.SIGTERM)) and self.launcher_pid == os.getpid():
            os.kill(self.launcher_pid, signal.SIGTERM)
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue


class Watcher(threading.Thread):
    """The loop: read what is new, sample, record samples, run every detector, act."""

    def __init__(self, run: RunDir, plan: LaunchPlan | None, config: WatchConfig,
                 actions: Actions, *, sampler: Sampler | None = None,
                 detectors: Sequence[Detector] | None = None,
                 extra_detectors: Sequence[Detector] = (),
                 launcher_pid: int | None = None,
                 interrupted: threading.Event | None = None) -> None:
        super().__init__(name="distrun-watcher", daemon=True)
        self.run_dir, self.config, self.actions = run, config, actions
        self.state = RunState(run.path, plan)
        self.plan = self.state.plan
        self.sampler = sampler or for_vendor(self.plan.vendor if self.plan else "cpu")
        self.procs = ProcSampler()
        self.launcher_pid = launcher_pid or os.getpid()
        self.detectors = [*(default_detectors() if detectors is None else detectors),
                          *extra_detectors]
        self.verdict: Verdict | None = None
        self.checks: list[Finding] = []
        self.ongoing = ""  # the hang named and not resolved (Notice.opens), "" when none
        self._halt = threading.Event()
        self._signalled = interrupted or threading.Event()
        self._pids_checked = 0.0
        self._recorded = 0.0
        self.nodes = NodeWatch(self.state, config.stall_timeout_s)
        self._samples = run.append(SAMPLES)

    def interrupted(self) -> bool:
        """A stop signal reached the launcher, and not the one distrun sent to stop the job."""
        return self._signalled.is_set() and not (self.verdict is not None
                                                 and self.verdict.stopped)

    def run(self) -> None:
        while not self._halt.wait(self.config.interval_s):
            if self.interrupted():
                continue  # the ranks die of the signal: nothing to judge in that
            try:
                self.tick(time.time())
            except Exception as exc:  # the watcher must never take the job down
                self.actions.say(f"distrun: monitor: {type(exc).__name__}: {exc}")
                self.actions.record("monitor_error", error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> Verdict | None:
        """End the loop; one last ``final`` tick sees what the ranks left (one that left early)."""
        self._halt.set()
        self.nodes.stop()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=15)
        try:
            if any(getattr(d, FINAL_ATTR, False) for d in self.detectors) \
                    and not self.interrupted():
                self.tick(time.time(), final=True)
        except Exception as exc:  # as in run(): a report, never a traceback
            self.actions.say(f"distrun: monitor: {type(exc).__name__}: {exc}")
        self.sampler.close()
        self._samples.close()
        return self.verdict

    def tick(self, now: float, final: bool = False) -> None:
        st = self.state
        st.refresh()
        progress = self._progress()
        if final:
            reading, procs = DeviceReading(), {}
        else:
            self.nodes.update()
            self._find_pids(now)
            pids = {s.pid for s in st.ranks.values() if s.pid} | {
                p.pid for p in progress.values()}
            procs = self.procs.read(sorted(pids))
            reading = self.sampler.read()
            self._record(now, reading, procs)
        tick = Tick(now, st, self.plan, self.config, reading, procs, self.nodes, self.verdict,
                    self._cpu_seconds, self._stacks, progress, final)
        for detector in self.detectors:
            if final and not getattr(detector, FINAL_ATTR, False):
                continue
            for result in detector(tick):
                self._act(result, tick)
            tick.verdict = self.verdict

    def _progress(self) -> dict[int, RankProgress]:
        if not self.config.instrumented:
            return {}
        return read_states(self.run_dir.path / PROGRESS_DIR)

    def _act(self, result: Finding | Notice | Verdict, tick: Tick) -> None:
        if self.interrupted():
            return  # this tick may have seen ranks ending of the signal
        if isinstance(result, Finding):
            self.checks.append(result)
            tag = {"ok": "ok", "info": "note"}.get(result.severity, result.severity.upper())
            self.actions.say(f"distrun: verify: {tag}: {result.message}")
            self.actions.record("verified", check=result.id, severity=result.severity,
                                message=result.message)
        elif isinstance(result, Notice):
            if result.closes:
                self.ongoing = ""
            self.ongoing = result.opens or self.ongoing
            self._tell(result.lines, result.events)
            for name, data in result.files:
                self.actions.write_json(name, data)
        elif self.verdict is None or (result.stopped and not self.verdict.stopped):
            self._judge(result, tick)

    def _tell(self, lines: Sequence[str], events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        for line in lines:
            self.actions.say(line)
        for name, fields in events:
            self.actions.record(name, **fields)

    def _judge(self, result: Verdict, tick: Tick) -> None:
        self.verdict = result
        if result.announce is not None:
            self._tell(result.announce, result.events)
        else:
            for name, fields in result.events:
                self.actions.record(name, **fields)
            self.actions.record("stall_verdict", ranks=result.ranks, message=result.message,
                                action=self.config.stall_action, **result.fields)
            self.actions.say(f"distrun: {result.headline}: {result.message}")
        if result.stopped:
            pids = {s.pid for s in self.state.ranks.values() if s.pid}
            self.actions.stop(sorted(pids | {p.pid for p in tick.progress.values()}))

    def _stacks(self, ranks: Sequence[RankState]) -> Mapping[int, stall.Stack]:
        return stall.dump_stacks(ranks, self.run_dir.logs)

    def _find_pids(self, now: float) -> None:
        st = self.state
        if st.workers_at is None or now - self._pids_checked < 2.0:
            return
        if all(s.pid for s in st.ranks.values()):
            return
        self._pids_checked = now
        for rank, pid in rank_pids(self.launcher_pid).items():
            if rank in st.ranks and not st.ranks[rank].pid:
                st.ranks[rank].pid = pid

    def _record(self, now: float, reading: DeviceReading, procs: Mapping[int, ProcSample]) -> None:
        if now - self._recorded < self.config.record_every_s or self.state.workers_at is None:
            return
        self._recorded = now
        ranks = {str(r): {"pid": s.pid, "step": s.step, "heartbeat_age_s": s.age_s(now),
                          **(procs[s.pid].to_json() if s.pid and s.pid in procs else {})}
                 for r, s in self.state.ranks.items()}
        line = {"time": now, "node_rank": self.state.node_rank, "source": reading.source,
                "unavailable": reading.unavailable,
                "devices": [d.to_json() for d in reading.devices], "ranks": ranks}
        self._samples.write(json.dumps(line) + "\n")

    def _cpu_seconds(self) -> dict[int, float]:
        import psutil

        out = {}
        for state in self.state.ranks.values():
            if not state.pid:
                continue
            try:
                times = psutil.Process(state.pid).cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            out[state.pid] = times.user + times.system
        return out


def watch(run: RunDir, plan: LaunchPlan, config: WatchConfig, actions: Actions,
          **extra: Any) -> Watcher:
    watcher = Watcher(run, plan, config, actions, **extra)
    watcher.start()
    return watcher
