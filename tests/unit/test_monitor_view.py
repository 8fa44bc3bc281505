"""``distrun monitor`` over run directories written here: a finished job's ranks show how they
ended, steps per second comes from one read (``--json`` agrees with ``/metrics``), and the
table fits 80 columns without cutting a number."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from distrun.accelerators.inventory import parse_declared
from distrun.cli.monitor import Collector, table
from distrun.model.plan import Request
from distrun.monitor.report import render
from distrun.monitor.snapshot import snapshot
from distrun.monitor.state import RunState
from distrun.plan.planner import build
from tests.conftest import run_cli

T0 = 1_735_689_600.0  # 2025-01-01T00:00:00Z


def stamp(t: float) -> str:
    return f"2025-01-01T00:{int(t) // 60:02d}:{t % 60:09.6f}Z"


def write_run(root: Path, end: list[dict[str, Any]], steps: int = 20) -> Path:
    """A 2-rank job: joined, one progress event a second at 193.8 steps/s (rank 1 at 33333.5,
    a number that would not fit a narrow column), heartbeats, then ``end``."""
    run = root / "run"
    (run / "heartbeats").mkdir(parents=True)
    plan = build(Request(script="train.py", nproc_per_node="2"), parse_declared("1x2xcpu"))
    (run / "plan.json").write_text(plan.model_dump_json())
    events: list[dict[str, Any]] = [
        {"event": "launch_started", "time": stamp(0), "pid": 1, "node_rank": 0},
        {"event": "workers_started", "time": stamp(1), "ranks": {
            str(r): {"local_rank": r, "node_rank": 0, "host": "h"} for r in (0, 1)}}]
    events += [{"event": "rank_joined", "time": stamp(2), "rank": r, "device": "cpu",
                "pid": 100 + r} for r in (0, 1)]
    rates = {0: 193.8, 1: 33333.5}
    for k in range(steps):
        events += [{"event": "progress", "time": stamp(3 + k), "rank": r,
                    "step": round(rates[r] * k), "metrics": {"loss": 1234567.0 / (k + 1)}}
                   for r in (0, 1)]
    events += [{**e, "time": stamp(3 + steps)} for e in end]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    for r in (0, 1):
        last = steps - 1
        (run / "heartbeats" / f"rank-{r}").write_text(
            f"{T0 + 3 + last:.3f} {round(rates[r] * last)}")
    return run


def read(run: Path) -> dict[str, Any]:
    state = RunState(run)
    state.refresh()
    return snapshot(state, now=T0 + 30)


SUCCEEDED = [{"event": "job_finished", "status": "succeeded", "exitcode": 0}]
FAILED = [{"event": "rank_exited", "rank": 1, "exitcode": 3},
          {"event": "job_finished", "status": "failed", "exitcode": 1}]
KILLED = [{"event": "rank_exited", "rank": 0, "exitcode": -9, "signal": "SIGKILL"},
          {"event": "job_finished", "status": "failed", "exitcode": 1}]


@pytest.mark.parametrize(("end", "statuses"), [
    (SUCCEEDED, ["exited 0", "exited 0"]),
    (FAILED, ["killed", "failed (exit 3)"]),
    (KILLED, ["killed (SIGKILL)", "killed"]),
    ([], ["running", "running"]),  # no end recorded, heartbeats 8 s old at now=T0+30
])
def test_ranks_of_a_finished_job_show_how_they_ended(tmp_path: Path, end: list[dict[str, Any]],
                                                     statuses: list[str]) -> None:
    run = write_run(tmp_path, end)
    snap = read(run)
    assert [r["status"] for r in snap["ranks"]] == statuses
    page = render(run) if end else ""  # the report shows the same (an ended job's)
    for status in statuses if end else ():
        assert f"<td>{status}</td>" in page or f"<td>{status}; " in page


def test_steps_per_second_from_one_read_equals_the_metrics(tmp_path: Path) -> None:
    """``monitor --json`` reads the directory once: it used to give null while /metrics,
    which had read it many times, gave 193.8."""
    run = write_run(tmp_path, SUCCEEDED)
    rates = [r["steps_per_second"] for r in read(run)["ranks"]]
    assert rates[0] == pytest.approx(193.8, rel=0.01)
    assert rates[1] == pytest.approx(33333.5, rel=0.01)
    state = RunState(run)
    metrics = {m.name: m for m in Collector(state, 30.0).collect()}
    gauge = {s.labels["rank"]: s.value for s in metrics["distrun_rank_steps_per_second"].samples}
    assert gauge == {"0": pytest.approx(rates[0]), "1": pytest.approx(rates[1])}


def test_steps_per_second_is_not_made_of_timestamp_rounding() -> None:
    """A job of microsecond steps: its heartbeat file keeps milliseconds, its progress events
    microseconds, so the same few milliseconds hold points out of order. The rate is taken
    between the first time each step was seen, and only over a span the rounding cannot
    dominate; it read 0.00 or thousands of steps/s."""
    from distrun.monitor.state import RankState
    fast = RankState(rank=0)
    for when, step in ((100.1234, 255), (100.123, 256), (100.1236, 256)):
        fast.add_point(when, step)
    assert fast.steps_per_s() is None  # it read 0.00 (min/max by time: 255 after 256)
    fast.add_point(99.0, 0)
    assert fast.steps_per_s() == pytest.approx(256 / 1.123)
    same = RankState(rank=1)
    same.add_point(100.123, 256)
    same.add_point(100.1234, 256)
    assert same.steps_per_s() is None  # one step seen twice is no rate, not 0.00


@pytest.mark.parametrize("width", [80, 60, 120])
def test_table_fits_the_screen_and_cuts_no_number(tmp_path: Path, width: int) -> None:
    snap = read(write_run(tmp_path, FAILED))
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    console.print(table(snap, console.width))
    text = out.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    rates = [f"{r['steps_per_second']:.2f}" for r in snap["ranks"]]
    assert rates[1].startswith("33333.")  # the number the 80-column table once cut to "33…"
    for must in (*rates, "633336", "failed (exit 3)", "rank", "step/s", "status"):
        assert must in text
    if width >= 120:  # wide: every column
        assert all(h in text for h in ("node", "local", "cpu", "beat", "device"))


BOOM = "RuntimeError: boom <b>x</b> [red]y[/]"
FIRST_FROM_EVENTS = [
    {"event": "rank_exited", "rank": 0, "exitcode": -15, "signal": "SIGTERM",
     "role": "stopped or failed after"},
    {"event": "rank_exited", "rank": 1, "exitcode": 1, "role": "first failure"},
    {"event": "job_finished", "status": "failed", "exitcode": 1, "message": BOOM}]


@pytest.mark.parametrize("source", ["events", "summary.json"])
def test_a_failed_job_says_what_failed_and_which_rank_failed_first(tmp_path: Path,
                                                                   source: str) -> None:
    """The rank that failed first and the message, as ``distrun launch`` said them: from the
    rank_exited roles, or from summary.json's first_failure (the events then name no role)."""
    end = FIRST_FROM_EVENTS
    if source == "summary.json":
        end = [{k: v for k, v in e.items() if k != "role"} for e in end]
    run = write_run(tmp_path, end)
    if source == "summary.json":
        (run / "summary.json").write_text(json.dumps(
            {"status": "failed", "exitcode": 1, "message": BOOM, "first_failure": 1}))
    assert run_cli(["report", str(run), "-o", "r.html"], cwd=tmp_path, timeout=60
                   ).returncode == 0
    page = (tmp_path / "r.html").read_text()
    assert ('<p class="verdict" id="failure">rank 1 failed first (RuntimeError: boom '
            "&lt;b&gt;x&lt;/b&gt; [red]y[/]); its log: logs/rank-1.log</p>") in page
    assert "<td>failed (exit 1); FAILED FIRST</td>" in page
    assert page.count("FAILED FIRST") == 1  # the rank stopped after it is not flagged
    shown = run_cli(["monitor", str(run), "--once"], cwd=tmp_path, timeout=60,
                    env={"COLUMNS": "200"}).stdout
    assert f"rank 1 failed first ({BOOM}); its log: logs/rank-1.log" in shown
    snap = json.loads(run_cli(["monitor", str(run), "--json"], cwd=tmp_path, timeout=60).stdout)
    assert (snap["first_failure"], snap["message"]) == (1, BOOM)


def test_a_succeeded_job_shows_no_failure(tmp_path: Path) -> None:
    page = render(write_run(tmp_path, SUCCEEDED))
    assert 'id="failure"' not in page and "FAILED FIRST" not in page
