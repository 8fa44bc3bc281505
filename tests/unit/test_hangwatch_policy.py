"""When the hang detector stops a job by itself: only when waiting cannot succeed, at the
backend's own timeout, or after an explicit --stall-timeout; never with --stall-action warn.
The proof line, as a pure function of the progress files and CPU use. The hang detector as a
decision over the Tick (no I/O), and the one watcher loop acting on what it returns."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.model.findings import Finding
from distrun.model.plan import Request
from distrun.model.progress import GroupProgress, RankProgress
from distrun.model.rundir import RunDir
from distrun.monitor.detectors import Notice, Tick, Verdict, WatchConfig
from distrun.monitor.hang import HangVerdict, Kind
from distrun.monitor.hangdetect import (
    HangConfig,
    HangDetector,
    ProofDetector,
    hang_detectors,
    proof,
    should_stop,
)
from distrun.monitor.nodewatch import NodeWatch
from distrun.monitor.samples import DeviceReading, ProcSample
from distrun.monitor.stall import Stack
from distrun.monitor.state import RankState, RunState
from distrun.monitor.watcher import Watcher
from distrun.plan.planner import build

NOW = 1_700_000_100.0
PLAN = build(Request(script="train.py", nproc_per_node="2"), parse_declared("1x2xcpu"))


def verdict(kind: Kind, waited: float, timeout: float | None = 1800.0) -> HangVerdict:
    return HangVerdict(kind, (1,), (0,), "0", 4, "gloo:all_reduce", (), waited, (), {}, timeout)


def test_default_names_and_waits_until_the_backend_timeout() -> None:
    config = HangConfig()
    assert should_stop(verdict(Kind.BUSY, 90.0), config) == (False, "")
    assert should_stop(verdict(Kind.IDLE, 1796.0), config) == (
        True, "the backend's own timeout (1800 s) is about to fire")
    assert should_stop(verdict(Kind.MISMATCH, 10.0), config) == (True, "waiting cannot succeed")
    # a rank gone: torchelastic reports a failed rank first; distrun stops only if it does not
    assert should_stop(verdict(Kind.GONE, 0.5), config) == (False, "")
    assert should_stop(verdict(Kind.GONE, 12.0), config) == (True, "waiting cannot succeed")


def test_stall_timeout_keeps_its_meaning_and_warn_never_stops() -> None:
    assert should_stop(verdict(Kind.BUSY, 31.0), HangConfig(stall_timeout_s=30.0)) == (
        True, "no progress for 31 s (--stall-timeout 30)")
    assert should_stop(verdict(Kind.GONE, 1.0), HangConfig(action="warn"))[0] is False


def rp(rank: int, device: str = "cpu", host: str = "h") -> RankProgress:
    return RankProgress(rank=rank, pid=10 + rank, host=host, device=device, joined_at=1.0)


def test_proof_lines() -> None:
    assert proof({0: rp(0), 1: rp(1)}, [0, 1], {0: 90.0, 1: 80.0}).message == (
        "2/2 ranks joined, each its own process (CPU), 2/2 processes busy")
    gpu = proof({0: rp(0, "cuda:0"), 1: rp(1, "cuda:1")}, [0, 1], {0: 50.0, 1: 0.0})
    assert (gpu.severity, gpu.message) == (
        "warning", "2/2 ranks joined, each on its own device (cuda:0, cuda:1), 1/2 ranks' "
        "processes busy; idle: rank(s) 1")
    shared = proof({0: rp(0, "cuda:0"), 1: rp(1, "cuda:0")}, [0, 1], {})
    assert shared.severity == "error" and "ranks 0 and 1 share cuda:0 on h" in shared.message
    missing = proof({0: rp(0)}, [0, 1], {})
    assert (missing.severity, missing.message) == (
        "warning", "1/2 ranks joined; rank(s) 1 created no process group")


def progress(rank: int, enq: int, done: int, op: str = "gloo:all_reduce",
             exited: float | None = None) -> RankProgress:
    group = GroupProgress(pg="0", ranks=(0, 1), enqueued=enq, completed=done,
                          changed_at=NOW - 20, op=op if enq > done else "",
                          op_seq=enq if enq > done else 0, sizes=((10,),) if enq > done else (),
                          timeout_s=1800.0)
    return RankProgress(rank=rank, pid=4000 + rank, host="h", device="cpu", joined_at=NOW - 60,
                        exited_at=exited, groups={"0": group})


class Probes:
    """The tick's probes, recording what a detector asked for."""

    def __init__(self) -> None:
        self.asked: list[list[int]] = []

    def stacks(self, ranks: Sequence[RankState]) -> dict[int, Stack]:
        self.asked.append([r.rank for r in ranks])
        return {r.rank: Stack(f"sleep (job.py:{r.rank})", "py-spy") for r in ranks}


def hang_tick(tmp_path: Path, states: dict[int, RankProgress], probes: Probes,
              cpu: float | None = 0.0, final: bool = False) -> Tick:
    state = RunState(tmp_path, PLAN)
    procs = {s.pid: ProcSample(s.pid, cpu) for s in states.values()}
    return Tick(NOW, state, PLAN, WatchConfig(instrumented=True), DeviceReading(), procs,
                NodeWatch(state, 30.0), None, dict, probes.stacks, states, final)


MISMATCH = {0: progress(0, 2, 1), 1: progress(1, 2, 1, op="gloo:broadcast")}


def test_the_hang_detector_is_a_pure_function_of_the_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    monkeypatch.chdir(empty)
    probes = Probes()
    t = hang_tick(empty, MISMATCH, probes)

    def no_io(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a detector did I/O: {args}")

    monkeypatch.setattr("builtins.open", no_io)
    monkeypatch.setattr(os, "kill", no_io)
    first, second = HangDetector([0, 1])(t), HangDetector([0, 1])(t)
    monkeypatch.undo()
    assert first == second and len(first) == 2
    notice, stop = first
    assert isinstance(notice, Notice) and isinstance(stop, Verdict)
    assert notice.lines[0].startswith("distrun: HANG (kind 3, mismatch): collective mismatch")
    assert notice.lines[1:3] == ("distrun: stack of rank 1 (py-spy):", "    sleep (job.py:1)")
    assert notice.lines[-1] == "    sleep (job.py:1)"  # the stop's own line says why, once
    assert [name for name, _ in notice.events] == ["hang"]
    [(name, record)] = notice.files
    assert name == "hang.json" and record["kind"] == "mismatch" and record["time"] == NOW
    assert stop.stopped and stop.ranks == [1] and stop.announce == (
        "distrun: stopping the job: waiting cannot succeed",)
    assert stop.events == (("hang_stop", {"culprits": [1], "reason": "waiting cannot succeed"}),)
    assert probes.asked == [[1], [1]]  # stacks only through the tick's probe
    assert list(empty.iterdir()) == []


def test_named_once_resolved_once_and_warn_never_stops(tmp_path: Path) -> None:
    detector = HangDetector([0, 1], HangConfig(action="warn"))
    hung = {0: progress(0, 2, 1), 1: progress(1, 1, 1)}
    first = detector(hang_tick(tmp_path, hung, Probes()))
    assert [type(r) for r in first] == [Notice]
    assert isinstance(first[0], Notice) and first[0].lines[-1] == (
        "distrun: --stall-action warn: the job keeps running")
    assert detector(hang_tick(tmp_path, hung, Probes())) == []
    moved = {0: progress(0, 2, 2), 1: progress(1, 2, 2)}
    [resolved] = detector(hang_tick(tmp_path, moved, Probes()))
    assert isinstance(resolved, Notice) and resolved.lines == (
        "distrun: hang resolved: rank 1 caught up and collective #2 (gloo:all_reduce [[10]], "
        "process group 0) went on",)


def test_a_hang_that_resolved_just_before_the_end_is_reported_in_the_final_look(
        tmp_path: Path) -> None:
    hung = {0: progress(0, 2, 1), 1: progress(1, 1, 1)}
    resolving = HangDetector([0, 1], HangConfig(action="warn"))
    resolving(hang_tick(tmp_path, hung, Probes()))
    moved = {r: progress(r, 2, 2, exited=NOW - 1) for r in (0, 1)}
    [resolved] = resolving(hang_tick(tmp_path, moved, Probes(), final=True))
    assert isinstance(resolved, Notice) and resolved.lines == (
        "distrun: hang resolved: rank 1 caught up and collective #2 (gloo:all_reduce [[10]], "
        "process group 0) went on",)
    # the job ended inside the hang: every rank is gone, the collective never completed
    ended = HangDetector([0, 1], HangConfig(action="warn"))
    ended(hang_tick(tmp_path, hung, Probes()))
    still = {0: progress(0, 2, 1, exited=NOW - 1), 1: progress(1, 1, 1, exited=NOW - 1)}
    out = ended(hang_tick(tmp_path, still, Probes(), final=True))
    assert not any("resolved" in line for r in out if isinstance(r, Notice) for line in r.lines)


def test_a_rank_gone_is_named_in_the_final_look_without_a_stop(tmp_path: Path) -> None:
    gone = {0: progress(0, 2, 1), 1: progress(1, 1, 1, exited=NOW - 1)}
    proving, hanging = hang_detectors([0, 1], HangConfig())
    hang_out = hanging(hang_tick(tmp_path, gone, Probes(), final=True))
    assert [type(r) for r in hang_out] == [Notice]
    assert isinstance(hang_out[0], Notice)
    assert hang_out[0].lines[0].startswith("distrun: HANG (kind 4, gone): rank 1")
    assert hang_out[0].lines[-1] == "distrun: found after the job ended"
    assert [type(r) for r in proving(hang_tick(tmp_path, gone, Probes(), final=True))] == [
        Finding]


def at(t: Tick, when: float) -> Tick:
    t.now = when
    return t


def test_proof_waits_for_the_cpu_window_or_the_end(tmp_path: Path) -> None:
    healthy = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    detector = ProofDetector([0, 1])
    assert detector(hang_tick(tmp_path, healthy, Probes(), cpu=80.0)) == []
    assert detector(at(hang_tick(tmp_path, healthy, Probes(), cpu=80.0), NOW + 1)) == []
    [found] = detector(at(hang_tick(tmp_path, healthy, Probes(), cpu=80.0), NOW + 4))
    assert isinstance(found, Finding) and (found.id, found.severity, found.message) == (
        "joined", "ok", "2/2 ranks joined, each its own process (CPU), 2/2 processes busy")
    assert detector(at(hang_tick(tmp_path, healthy, Probes()), NOW + 5)) == []  # said once
    short = ProofDetector([0, 1])  # the work took 0.5 s; then 1.5 s idle in the exit path
    short(hang_tick(tmp_path, healthy, Probes(), cpu=0.0))
    short(at(hang_tick(tmp_path, healthy, Probes(), cpu=0.0), NOW + 1))
    [ended] = short(at(hang_tick(tmp_path, healthy, Probes(), final=True), NOW + 2))
    assert isinstance(ended, Finding) and ended.message == (
        "2/2 ranks joined, each its own process (the job ended before its activity could be "
        "sampled)")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.said: list[str] = []
        self.files: dict[str, Any] = {}
        self.stopped: list[list[int]] = []

    def record(self, name: str, **fields: Any) -> None:
        self.events.append((name, fields))

    def say(self, text: str) -> None:
        self.said.append(text)

    def write_json(self, name: str, data: Any) -> None:
        self.files[name] = json.loads(json.dumps(data))

    def stop(self, pids: list[int]) -> None:
        self.stopped.append(pids)


def mismatch_watcher(tmp_path: Path, actions: Recorder,
                     signalled: threading.Event | None = None) -> tuple[Watcher, RunDir]:
    """The watcher's one loop over a run whose 2 ranks' progress files show a kind-3 hang."""
    run = RunDir(tmp_path / "run")
    folder = run.path / "progress"
    folder.mkdir()
    for state in MISMATCH.values():
        (folder / f"rank-{state.rank}.json").write_text(state.dumps())
    watcher = Watcher(run, PLAN, WatchConfig(instrumented=True), actions, detectors=[],
                      extra_detectors=[HangDetector([0, 1])], interrupted=signalled)
    watcher._stacks = lambda ranks: {}  # type: ignore[method-assign]  # no py-spy on strangers
    return watcher, run


def test_the_one_loop_names_the_hang_and_stops_through_its_actions(tmp_path: Path) -> None:
    actions = Recorder()
    watcher, run = mismatch_watcher(tmp_path, actions)
    try:
        watcher.tick(NOW)
        watcher.tick(NOW + 1)
    finally:
        verdict = watcher.stop()
        run.close()
    assert verdict is not None and verdict.stopped and verdict.ranks == [1]
    assert verdict.message.endswith("; waiting cannot succeed: distrun stopped the job")
    assert [n for n, _ in actions.events] == ["hang", "hang_stop"]  # no stall_verdict
    assert actions.said[0].startswith("distrun: HANG (kind 3, mismatch)")
    assert actions.said[-1] == "distrun: stopping the job: waiting cannot succeed"
    assert actions.files["hang.json"]["culprits"] == [1]
    assert actions.stopped == [[4000, 4001]]


def test_a_job_without_a_torch_process_group_is_proven_by_its_distrun_init_joins(
        tmp_path: Path) -> None:
    t = hang_tick(tmp_path, {}, Probes(), final=True)  # JAX: no progress file at all
    assert ProofDetector([0, 1])(t) == []  # no join seen: nothing claimed
    for rank in (0, 1):  # what distrun.init()'s rank_joined events give the run state
        t.state.ranks[rank] = RankState(rank=rank, pid=300 + rank, host="h", device="cpu:0",
                                        joined_at=NOW - 2)
    [found] = ProofDetector([0, 1])(t)
    assert isinstance(found, Finding) and (found.severity, found.message) == (
        "ok", "2/2 ranks joined, each its own process (the job ended before its activity could "
              "be sampled)")  # cpu:0 is each JAX process's own CPU, not a shared device
    t.state.ranks.pop(1)
    [late] = ProofDetector([0, 1])(t)
    assert (late.severity, late.message) == (
        "warning", "1/2 ranks joined; rank(s) 1 created no process group")


def test_a_setup_wait_is_not_idleness_but_a_rank_that_never_works_is_named(
        tmp_path: Path) -> None:
    healthy = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    detector = ProofDetector([0, 1])
    for second in range(0, 12):  # both wait (a JIT build's lock, a compiler) for 12 s
        assert detector(at(hang_tick(tmp_path, healthy, Probes(), cpu=0.0), NOW + second)) == []
    stepped = {0: progress(0, 5, 5), 1: progress(1, 5, 5)}  # then collectives complete
    [found] = detector(at(hang_tick(tmp_path, stepped, Probes(), cpu=0.0), NOW + 12))
    assert (found.severity, found.message) == (
        "ok", "2/2 ranks joined, each its own process (CPU), 2/2 processes busy")
    lazy = ProofDetector([0, 1])
    one = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    for second in range(0, 31):
        one = {0: progress(0, 3 + second, 3 + second), 1: progress(1, 3, 3)}
        said = lazy(at(hang_tick(tmp_path, one, Probes(), cpu=0.0), NOW + second))
    [late] = said
    assert (late.severity, late.message) == (
        "warning", "2/2 ranks joined, each its own process (CPU), 1/2 processes busy; idle: "
                   "rank(s) 1")


def test_a_stop_signal_to_the_launcher_judges_nothing_after_it(tmp_path: Path) -> None:
    """Ctrl-C while ranks die of it: no tick may act on what it sees (the ranks "gone"), the
    last look is skipped, and the hang named before stays the one to report."""
    actions, signalled = Recorder(), threading.Event()
    watcher, run = mismatch_watcher(tmp_path, actions, signalled)
    try:
        assert not watcher.interrupted()
        signalled.set()
        assert watcher.interrupted()
        watcher.tick(NOW)
        watcher.tick(NOW + 1)
    finally:
        verdict = watcher.stop()
        run.close()
    assert verdict is None and actions.said == [] and actions.stopped == []
    assert actions.events == [] and actions.files == {}


def test_the_signal_distrun_sent_to_stop_the_job_is_not_an_interruption(tmp_path: Path) -> None:
    signalled = threading.Event()
    watcher, run = mismatch_watcher(tmp_path, Recorder(), signalled)
    try:
        watcher.tick(NOW)
        watcher.tick(NOW + 1)  # kind 3: distrun stops the job
        signalled.set()  # the launcher sees its own stop arrive
        assert watcher.verdict is not None and watcher.verdict.stopped
        assert not watcher.interrupted()
    finally:
        watcher.stop()
        run.close()
