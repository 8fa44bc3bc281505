"""The quiet job (every rank alive and idle, none inside a torch.distributed op, nothing
progressed): the pure verdict, the detector's policy (named once, stopped only by
--stall-timeout, resolved when progress resumes), and what a culprit's stack says."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from distrun.model.progress import RankProgress
from distrun.monitor.detectors import Notice, Verdict
from distrun.monitor.hang import RankHealth, cause_line
from distrun.monitor.hangdetect import HangConfig, HangDetector
from distrun.monitor.quiet import quiet_verdict
from distrun.monitor.stall import Stack
from tests.unit.test_hangwatch_policy import NOW, Probes, at, hang_tick, progress

IDLE = {0: RankHealth(True, 0.0), 1: RankHealth(True, 2.0)}


def quiet(states: dict[int, RankProgress], health: dict[int, RankHealth] = IDLE,
          beats: dict[int, float | None] | None = None, now: float = NOW + 20):
    # progress(): joined 60 s and last changed 20 s before NOW
    return quiet_verdict(states, health, beats or {}, now, [0, 1], after_s=30.0)


def test_every_rank_idle_with_nothing_in_flight_is_named_after_the_quiet_time() -> None:
    done = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    v = quiet(done)
    assert v is not None and v.culprits == (0, 1) and round(v.waited_s) == 40
    assert v.message() == (
        "no rank has made progress for 40 s: ranks 0, 1 are idle outside any collective "
        "(rank 0 0%, rank 1 2% CPU) since collective #3 of process group 0 completed: hung, "
        "sleeping or blocked on something outside torch.distributed (a lock, I/O, an input); "
        "see the stacks")
    assert cause_line(v.to_json()) == (
        "rank 0, 1 sat idle outside any collective, with no progress since collective #3 of "
        "process group 0 completed", [0, 1])
    assert quiet(done, now=NOW + 5) is None  # 25 s: not yet
    joined = {r: replace(s, groups={}) for r, s in done.items()}
    assert quiet(joined, now=NOW).since == "the ranks joined (no collective yet)"


def test_any_sign_of_life_or_of_a_collective_hang_is_not_quiet() -> None:
    done = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    assert quiet(done, {0: RankHealth(True, 0.0), 1: RankHealth(True, 60.0)}) is None  # busy
    assert quiet(done, {0: RankHealth(True, 0.0), 1: RankHealth(True, None)}) is None  # unknown
    assert quiet(done, {0: RankHealth(True, 0.0), 1: RankHealth(False, 0.0)}) is None  # gone
    assert quiet(done, beats={1: NOW + 15}) is None  # ctx.step beat 5 s ago
    assert quiet({0: progress(0, 4, 3), 1: progress(1, 3, 3)}) is None  # the hang verdict's
    assert quiet({0: progress(0, 3, 3)}) is None  # rank 1 never joined: the proof says so
    assert quiet({0: progress(0, 3, 3), 1: progress(1, 3, 3, exited=NOW)}) is None


def test_named_once_and_the_job_keeps_running_by_default(tmp_path: Path) -> None:
    states = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    detector, probes = HangDetector([0, 1]), Probes()
    assert detector(at(hang_tick(tmp_path, states, probes), NOW + 5)) == []
    [notice] = detector(at(hang_tick(tmp_path, states, probes), NOW + 11))
    assert isinstance(notice, Notice)
    assert notice.lines[0].startswith("distrun: HANG (kind 1, idle): no rank has made progress "
                                      "for 31 s: ranks 0, 1 are idle outside any collective")
    assert notice.lines[-1] == ("distrun: the job keeps running (waiting may still succeed; no "
                                "timeout known); pass --stall-timeout SECONDS to stop it")
    assert probes.asked == [[0, 1]]
    assert detector(at(hang_tick(tmp_path, states, probes), NOW + 12)) == []  # said once
    moved = {0: progress(0, 4, 4), 1: replace(progress(1, 4, 4))}
    moved = {r: replace(s, groups={"0": replace(s.groups["0"], changed_at=NOW + 12)})
             for r, s in moved.items()}
    [resolved] = detector(at(hang_tick(tmp_path, moved, probes), NOW + 13))
    assert isinstance(resolved, Notice) and resolved.lines == (
        "distrun: hang resolved: ranks 0, 1 made progress again",)
    assert resolved.events == (("hang_resolved", {"culprits": [0, 1], "quiet": True}),)


def test_stall_timeout_names_it_sooner_and_stops_it(tmp_path: Path) -> None:
    states = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    detector = HangDetector([0, 1], HangConfig(stall_timeout_s=8.0))
    notice, stop = detector(at(hang_tick(tmp_path, states, Probes()), NOW - 11))
    assert isinstance(notice, Notice) and isinstance(stop, Verdict) and stop.stopped
    assert notice.lines[0].startswith("distrun: HANG (kind 1, idle): no rank has made progress "
                                      "for 9 s")
    assert not any("keeps running" in line for line in notice.lines)  # no contradicting plan
    assert stop.announce == ("distrun: stopping the job: no progress for 9 s "
                             "(--stall-timeout 8)",)
    warn = HangDetector([0, 1], HangConfig(stall_timeout_s=8.0, action="warn"))
    [only] = warn(at(hang_tick(tmp_path, states, Probes()), NOW - 11))
    assert only.lines[-1] == "distrun: --stall-action warn: the job keeps running"


PY_SPY = '''Process 11068: python -u job.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 11068 (idle): "MainThread"
    FileBaton.wait (torch/utils/file_baton.py:50)
    main (job.py:20)
Thread 11103 (idle): "distrun-progress"
    Event.wait (threading.py:629)
Thread 11104 (active+gil): "pt_elastic"
    run (elastic.py:1)'''


def test_known_waits_reach_the_record_once_with_the_ranks_they_hold(tmp_path: Path) -> None:
    class Spy(Probes):
        def stacks(self, ranks):  # type: ignore[no-untyped-def]
            return {r.rank: Stack(PY_SPY, "py-spy") for r in ranks}

    states = {0: progress(0, 3, 3), 1: progress(1, 3, 3)}
    [notice] = HangDetector([0, 1])(at(hang_tick(tmp_path, states, Spy()), NOW + 11))
    [(name, event)] = notice.events
    assert name == "hang"
    assert event["hints"] == [
        "ranks 0, 1: waits for the lock of a JIT-built C++/CUDA extension (torch.utils."
        "cpp_extension, as DeepSpeed ops use): another build holds it, or a build that was "
        "killed left it behind; if no build runs, delete the 'lock' file in that extension's "
        "folder under $TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions)"]
    assert event["message"].endswith(event["hints"][0])
    assert dict(notice.files)["hang.json"]["hints"] == event["hints"]
    assert sum("JIT-built" in line for line in notice.lines) == 2  # per stack on the console


def test_a_stack_shows_the_users_threads_and_names_known_waits() -> None:
    stack = Stack(PY_SPY, "py-spy")
    assert "distrun-progress" not in stack.shown() and "Event.wait" not in stack.shown()
    assert "main (job.py:20)" in stack.shown() and "run (elastic.py:1)" in stack.shown()
    assert stack.hint().startswith("waits for the lock of a JIT-built C++/CUDA extension")
    faulthandler = Stack('Thread 0x7f (most recent call first):\n  File "/v/lib/python3.11/'
                         'site-packages/filelock/_api.py", line 332 in acquire', "faulthandler")
    assert faulthandler.hint().startswith("waits for a filelock")
    assert Stack("    trace_dispatch (bdb.py:90)\n    main (job.py:3)", "py-spy").hint(
        ).startswith("stopped in the Python debugger")
    assert Stack("    _get_data (torch/utils/data/dataloader.py:1133)", "py-spy").hint(
        ).startswith("waits for its DataLoader workers")
    assert Stack("    main (mypdb.py:3)\n    sleep (job.py:1)", "py-spy").hint() == ""
