"""The watcher's detectors as pure decisions, and the loop acting only through its actions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrun.accelerators.inventory import parse_declared
from distrun.model.findings import Finding
from distrun.model.plan import Request
from distrun.model.record import (
    BadLine,
    JobOutcome,
    JobStatus,
    RankExited,
    RankFailure,
    parse_event,
)
from distrun.model.rundir import RunDir
from distrun.monitor import detectors
from distrun.monitor.detectors import Tick, Verdict, WatchConfig
from distrun.monitor.nodewatch import NodeWatch
from distrun.monitor.samples import DeviceReading
from distrun.monitor.stall import Stack
from distrun.monitor.state import RankState, RunState
from distrun.monitor.watcher import Watcher
from distrun.plan.planner import build

PLAN = build(Request(script="train.py", nproc_per_node="2"), parse_declared("1x2xH100-80GB"))
NOW = 1_700_000_100.0


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.said: list[str] = []
        self.stopped: list[list[int]] = []

    def record(self, name: str, **fields: Any) -> None:
        self.events.append((name, fields))

    def say(self, text: str) -> None:
        self.said.append(text)

    def stop(self, pids: list[int]) -> None:
        self.stopped.append(pids)


def beating_state(tmp_path: Path, ages: dict[int, float]) -> RunState:
    state = RunState(tmp_path, PLAN)
    for rank, age in ages.items():
        s = state.rank(rank)
        s.node_rank, s.local_rank, s.pid, s.step = 0, rank, 1000 + rank, 7 + rank
        s.joined_at = s.first_beat = NOW - 100
        s.beat_time = NOW - age
    return state


def tick(state: RunState, config: WatchConfig, stacks: dict[int, Stack]) -> Tick:
    return Tick(NOW, state, PLAN, config, DeviceReading(), {}, NodeWatch(state, 5.0), None,
                dict, lambda ranks: {r.rank: stacks[r.rank] for r in ranks if r.rank in stacks})


def test_stall_detector_returns_a_verdict_and_does_nothing_itself(tmp_path: Path) -> None:
    state = beating_state(tmp_path, {0: 20.0, 1: 1.0})
    out = detectors.stalled(tick(state, WatchConfig(stall_timeout_s=5), {}))
    assert len(out) == 1 and isinstance(out[0], Verdict)
    verdict = out[0]
    assert verdict.ranks == [0] and verdict.stopped and verdict.headline == "STALLED"
    assert verdict.message.startswith("rank 0 (node 0, local rank 0) stalled: no heartbeat for "
                                      "20.0 s (last step 7, --stall-timeout 5 s)")
    assert [(name, f["rank"], f["culprit"]) for name, f in verdict.events] == [
        ("stalled", 0, True)]
    assert not (tmp_path / "events.jsonl").exists()


def test_no_verdict_while_every_rank_beats_or_after_one_was_given(tmp_path: Path) -> None:
    state = beating_state(tmp_path, {0: 1.0, 1: 2.0})
    assert detectors.stalled(tick(state, WatchConfig(stall_timeout_s=5), {})) == []
    late = beating_state(tmp_path, {0: 50.0})
    t = tick(late, WatchConfig(stall_timeout_s=5), {})
    t.verdict = Verdict([1], "earlier", True)
    assert detectors.stalled(t) == [] and detectors.lost_node(t) == []


def test_warn_action_gives_a_verdict_that_does_not_stop(tmp_path: Path) -> None:
    state = beating_state(tmp_path, {0: 20.0})
    verdict = detectors.stalled(tick(state, WatchConfig(5, "warn"), {}))[0]
    assert isinstance(verdict, Verdict) and not verdict.stopped
    assert verdict.message.endswith("--stall-action warn: the job keeps running")


def test_the_loop_acts_on_findings_and_one_verdict_from_an_added_detector(
        tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    actions = Recorder()
    calls: list[float] = []

    def hang(t: Tick) -> Sequence[Finding | Verdict]:
        calls.append(t.now)
        return [Finding(id="hang", severity="warning", message="rank 1 waits"),
                Verdict([1], "rank 1 hangs in all_reduce", True, "HANG")]

    watcher = Watcher(run, PLAN, WatchConfig(), actions, detectors=[], extra_detectors=[hang])
    try:
        watcher.tick(NOW)
        watcher.tick(NOW + 1)
    finally:
        watcher.stop()
        run.close()
    assert calls == [NOW, NOW + 1]
    assert actions.said == ["distrun: verify: WARNING: rank 1 waits", "distrun: HANG: rank 1 "
                            "hangs in all_reduce", "distrun: verify: WARNING: rank 1 waits"]
    assert [name for name, _ in actions.events] == ["verified", "stall_verdict", "verified"]
    assert actions.events[1][1] == {"ranks": [1], "message": "rank 1 hangs in all_reduce",
                                    "action": "stop"}
    assert len(actions.stopped) == 1 and watcher.verdict is not None


def test_rank_failure_round_trips_through_the_rank_exited_event() -> None:
    failure = RankFailure(1, 1, 4242, -9, "SIGKILL", 1700000000.0, None, "killed by SIGKILL",
                          first=True)
    line = json.dumps({"time": "2025-01-01T00:00:00.000000Z", "event": "rank_exited",
                       "rank": 1, **failure.event_fields()})
    event = parse_event(line)
    assert isinstance(event, RankExited) and event.role == "first failure"
    assert event.failure() == failure
    outcome = JobOutcome(JobStatus.FAILED, 137, (failure,), 1, failure.message)
    assert outcome.failures_json() == {"1": {
        "local_rank": 1, "pid": 4242, "exitcode": -9, "signal": "SIGKILL",
        "failed_at": 1700000000.0, "error_file": None, "message": "killed by SIGKILL",
        "role": "first failure"}}


def test_unknown_events_are_kept_and_bad_ones_are_values() -> None:
    newer = parse_event('{"event": "hang_suspected", "rank": 3}')
    assert not isinstance(newer, BadLine) and newer.event == "hang_suspected"
    bad = parse_event('{"event": "rank_exited", "rank": -1}', "events.jsonl", 4)
    assert isinstance(bad, BadLine) and str(bad) == (
        "events.jsonl:4: bad rank_exited event: rank: Input should be greater than or equal "
        "to 0")
    assert isinstance(parse_event("{" * 100_000), BadLine)


def test_rank_state_stays_typed(tmp_path: Path) -> None:
    state = beating_state(tmp_path, {0: 1.0})
    assert isinstance(state.ranks[0], RankState) and state.expected() == [0, 1]
