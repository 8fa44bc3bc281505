"""The launcher's watcher thread: verification after start, device and process samples,
stall detection and the stop.

Started by ``distrun.launch.launcher.launch`` around torchrun; reads only the run directory
and this node's processes and devices, writes events, ``samples.jsonl`` and console lines.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from distrun.launch.rundir import RunDir
from distrun.monitor import stall, verify
from distrun.monitor.devices import Sampler, for_vendor
from distrun.monitor.nodewatch import NodeWatch
from distrun.monitor.procs import ProcSampler, rank_pids
from distrun.monitor.samples import DeviceReading, ProcSample
from distrun.monitor.state import RunState


@dataclass(frozen=True)
class WatchConfig:
    stall_timeout_s: float = 30.0
    stall_action: str = "stop"
    interval_s: float = 1.0
    record_every_s: float = 2.0
    settle_s: float = 3.0  # after every rank's first step, before judging device activity
    stall_stops: bool = True  # False: a heartbeat stall only warns (no --stall-timeout given)
    instrumented: bool = False  # join and CPU activity come from distrun.monitor.hangwatch

    @property
    def join_timeout_s(self) -> float:
        return max(60.0, 2 * self.stall_timeout_s)


@dataclass
class Verdict:
    ranks: list[int]
    message: str
    stopped: bool


@dataclass
class _Progress:
    joined_done: bool = False
    activity_done: bool = False
    workers_late_said: bool = False
    pids_checked: float = 0.0
    recorded: float = 0.0
    baseline: dict[int, float] = field(default_factory=dict)
    baseline_at: float = 0.0


class Watcher(threading.Thread):
    def __init__(self, run: RunDir, config: WatchConfig, *, sampler: Sampler | None = None,
                 out: TextIO | None = None, stop_job: Callable[[list[int]], None] | None = None,
                 launcher_pid: int | None = None) -> None:
        super().__init__(name="distrun-watcher", daemon=True)
        self.run_dir, self.config = run, config
        self.state = RunState(run.path)
        self.sampler = sampler or for_vendor(str(self.state.plan.get("vendor", "cpu")))
        self.procs = ProcSampler()
        self.out = out or sys.stderr
        self.stop_job = stop_job or self._terminate
        self.launcher_pid = launcher_pid or os.getpid()
        self.verdict: Verdict | None = None
        self.checks: list[verify.Check] = []
        self._halt = threading.Event()
        self._p = _Progress()
        self.nodes = NodeWatch(self.state, config.stall_timeout_s)
        self._samples = open(run.path / "samples.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def run(self) -> None:
        while not self._halt.wait(self.config.interval_s):
            try:
                self.tick(time.time())
            except Exception as exc:  # the watcher must never take the job down
                self.say(f"distrun: monitor: {type(exc).__name__}: {exc}")
                self.run_dir.event("monitor_error", error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> Verdict | None:
        self._halt.set()
        self.nodes.stop()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=15)
        self.sampler.close()
        self._samples.close()
        return self.verdict

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def tick(self, now: float) -> None:
        st = self.state
        st.refresh()
        self.nodes.update()
        self._find_pids(now)
        pids = [s.pid for s in st.ranks.values() if s.pid]
        procs = self.procs.read(pids)
        reading = self.sampler.read()
        self._record(now, reading, procs)
        self._verify_joined(now)
        self._verify_activity(now, reading, procs)
        if self.verdict is None:
            self._detect_lost_node(now)
        if self.verdict is None:
            self._detect_stall(now)

    def _find_pids(self, now: float) -> None:
        st = self.state
        if st.workers_at is None or now - self._p.pids_checked < 2.0:
            return
        if all(s.pid for s in st.ranks.values()):
            return
        self._p.pids_checked = now
        for rank, pid in rank_pids(self.launcher_pid).items():
            if rank in st.ranks and not st.ranks[rank].pid:
                st.ranks[rank].pid = pid

    def _record(self, now: float, reading: DeviceReading, procs: dict[int, ProcSample]) -> None:
        if now - self._p.recorded < self.config.record_every_s or self.state.workers_at is None:
            return
        self._p.recorded = now
        ranks = {str(r): {"pid": s.pid, "step": s.step, "heartbeat_age_s": s.age_s(now),
                          **(procs[s.pid].to_json() if s.pid in procs else {})}
                 for r, s in self.state.ranks.items()}
        line = {"time": now, "node_rank": self.state.node_rank, "source": reading.source,
                "unavailable": reading.unavailable,
                "devices": [d.to_json() for d in reading.devices], "ranks": ranks}
        self._samples.write(json.dumps(line) + "\n")
        self._samples.flush()

    def _report(self, checks: list[verify.Check]) -> None:
        for check in checks:
            self.checks.append(check)
            tag = {"ok": "ok", "info": "note"}.get(check.severity, check.severity.upper())
            self.say(f"distrun: verify: {tag}: {check.message}")
            self.run_dir.event("verified", check=check.id, severity=check.severity,
                               message=check.message)

    def _verify_joined(self, now: float) -> None:
        st, p = self.state, self._p
        if p.joined_done:
            return
        if st.workers_at is None:
            self._workers_late(now)
            return
        expected = st.expected()
        ready = all(verify._is_joined(st.ranks[r]) for r in expected if r in st.ranks)
        if not ready and now - st.workers_at < self.config.join_timeout_s:
            return
        p.joined_done = True
        if self.config.instrumented:  # joined: from the process group (hangwatch)
            self._report(verify.bindings(st.ranks))
            return
        world = int(st.plan.get("world_size", len(expected)))
        check = verify.joined(expected, st.ranks, st.node_rank, world)
        if check.severity != "ok":
            check = verify.Check(check.id, check.severity, check.message + (
                f" within {self.config.join_timeout_s:g} s of start (does the script call "
                "distrun.init()? a rank that never calls it holds the others in init)"))
        self._report([check, *verify.bindings(st.ranks)])

    def _workers_late(self, now: float) -> None:
        st = self.state
        waited = now - (st.launched_at or now)
        if (waited > self.config.join_timeout_s and not self._p.workers_late_said
                and int(st.plan.get("nnodes", 1)) > 1):
            self._p.workers_late_said = True
            self._report([verify.Check(
                "rendezvous", "warning",
                f"no workers after {waited:.0f} s: not every one of the "
                f"{st.plan.get('nnodes')} nodes has joined the rendezvous (torch waits 900 s "
                "by default before giving up); start distrun launch on every node")])

    def _verify_activity(self, now: float, reading: DeviceReading,
                         procs: dict[int, ProcSample]) -> None:
        st, p = self.state, self._p
        if p.activity_done or not p.joined_done:
            return
        all_beat = all(s.first_beat is not None for s in st.ranks.values())
        waited = (st.workers_at is not None
                  and now - st.workers_at > self.config.join_timeout_s + 10)
        if not (all_beat or waited):
            return
        if not p.baseline_at:
            p.baseline, p.baseline_at = self._cpu_seconds(), now
            return
        if now - p.baseline_at < self.config.settle_s:
            return
        p.activity_done = True
        self._report(self._activity(now, reading))

    def _activity(self, now: float, reading: DeviceReading) -> list[verify.Check]:
        st = self.state
        device_type = str(st.plan.get("device_type", "cpu"))
        if device_type in verify.SHARED_DEVICES and self.config.instrumented:
            return []  # CPU use is judged by the hang watch's proof line
        if device_type in verify.SHARED_DEVICES:
            used = self._cpu_seconds()
            span = max(now - self._p.baseline_at, 1e-3)
            procs = {pid: ProcSample(pid, 100.0 * (used.get(pid, 0.0) - base) / span)
                     for pid, base in self._p.baseline.items() if pid in used}
            gone = {pid: ProcSample(pid, 0.0, alive=False)
                    for pid in self._p.baseline if pid not in used}
            return verify.cpu_activity(st.ranks, {**procs, **gone})
        visible = [int(i) for i in st.node_plan().get("visible_devices", [])]
        return verify.device_activity(device_type, visible, st.ranks, reading, st.node_rank)

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

    def _detect_stall(self, now: float) -> None:
        st = self.state
        if st.finished:
            return
        stuck = stall.stalled(st.ranks, now, self.config.stall_timeout_s)
        if not stuck or self.nodes.holds_stall(now):
            return
        stacks = stall.dump_stacks(stuck, self.run_dir.logs)
        stopping = self.config.stall_action == "stop" and self.config.stall_stops
        blamed, message = stall.verdict(stuck, stacks, time.time(), self.config.stall_timeout_s,
                                        stopping)
        for s in stuck:
            s.stalled = {"rank": s.rank}
            stack = stacks.get(s.rank)
            self.run_dir.event("stalled", rank=s.rank, node_rank=s.node_rank,
                               local_rank=s.local_rank, pid=s.pid, last_step=s.step,
                               heartbeat_age_s=s.age_s(now), culprit=s in blamed,
                               stack=stack.text[-4000:] if stack else None,
                               stack_method=stack.method if stack else None)
        self.verdict = Verdict([s.rank for s in blamed], message, stopping)
        self.run_dir.event("stall_verdict", ranks=self.verdict.ranks, message=message,
                           action=self.config.stall_action)
        self.say(f"distrun: STALLED: {message}")
        if stopping:
            self.stop_job([s.pid for s in st.ranks.values() if s.pid])

    def _detect_lost_node(self, now: float) -> None:
        gone = self.nodes.lost(now)
        if not gone or self.state.finished:
            return
        stopping = self.config.stall_action == "stop"
        message = self.nodes.message(gone, stopping)
        for node in gone:
            self.run_dir.event("node_lost", node_rank=node.node, host=node.host,
                               ranks=list(node.ranks), last_heard_s=round(node.last_heard_s, 3),
                               last_step=node.step, reason=node.reason, store=self.nodes.store)
        self.verdict = Verdict([r for n in gone for r in n.ranks], message, stopping)
        self.run_dir.event("stall_verdict", ranks=self.verdict.ranks, message=message,
                           action=self.config.stall_action, lost_nodes=[n.node for n in gone])
        self.say(f"distrun: NODE LOST: {message}")
        if stopping:
            self.stop_job([s.pid for s in self.state.ranks.values() if s.pid])

    def _terminate(self, pids: list[int]) -> None:
        """SIGTERM to the launcher: torchelastic's handler stops the workers (then SIGKILL)."""
        if callable(signal.getsignal(signal.SIGTERM)) and self.launcher_pid == os.getpid():
            os.kill(self.launcher_pid, signal.SIGTERM)
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue


def watch(run: RunDir, stall_timeout_s: float | None, stall_action: str,
          instrumented: bool = False, **extra: Any) -> Watcher:
    config = WatchConfig(stall_timeout_s or 30.0, stall_action,
                         stall_stops=stall_timeout_s is not None, instrumented=instrumented)
    watcher = Watcher(run, config, **extra)
    watcher.start()
    return watcher
