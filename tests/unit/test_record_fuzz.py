"""Property tests: arbitrary JSON as run-directory records never gives a traceback.

Every event line, sample line and plan.json field is replaced by arbitrary JSON values (and by
well-formed events whose fields are arbitrary); ``distrun monitor --json`` / ``--once``,
``distrun report`` and ``distrun diagnose`` must exit with a documented status (monitor and
report 0 with a partial view, diagnose 0 or 1) and never raise.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distrun.accelerators.inventory import parse_declared
from distrun.cli.main import main
from distrun.model.plan import Request
from distrun.model.record import EVENT_TYPES, BadLine, parse_event, read_plan
from distrun.plan.planner import build

PLAN = build(Request(script="train.py", nproc_per_node="2"),
             parse_declared("1x2xH100-80GB")).model_dump(mode="json")
FIELDS = ("rank", "pid", "step", "metrics", "ranks", "node_rank", "local_rank", "exitcode",
          "status", "message", "device", "host", "master_addr", "master_port", "severity",
          "culprit", "signal", "failed_at", "heartbeat_age_s", "stack", "last_step", "check",
          "world_size", "role", "error_file", "lost_nodes")

scalars = (st.none() | st.booleans() | st.integers() | st.integers(-3, 3)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
           | st.sampled_from(["<img src=x onerror=alert(1)>", "[bold]x[/]", "0", "-1", "x"]))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6) | st.sampled_from(["0", "1", "loss"]), inner,
                      max_size=3), max_leaves=8)
times = st.sampled_from(["2025-01-01T00:00:00.000000Z", "2025-01-01T00:00:05.5Z", "bad"]) | scalars
events = st.fixed_dictionaries(
    {"event": st.sampled_from(sorted(EVENT_TYPES)) | st.text(max_size=6), "time": times},
    optional={name: json_values for name in FIELDS})
lines = st.lists(events | json_values | st.just("{not json") | st.just(""), max_size=8)
samples = st.lists(st.fixed_dictionaries(
    {"time": st.floats(0, 2e9) | scalars},
    optional={"devices": st.lists(st.dictionaries(
        st.sampled_from(["index", "utilization_percent", "pids", "name", "memory_used_bytes"]),
        json_values, max_size=4), max_size=2), "ranks": json_values, "unavailable": json_values})
    | json_values, max_size=4)
plan_fields = st.dictionaries(st.sampled_from(sorted(PLAN)), json_values, max_size=2)
node_fields = st.dictionaries(st.sampled_from(sorted(PLAN["nodes"][0])), json_values, max_size=2)


def write_run(run: Path, event_lines: list[Any], sample_lines: list[Any],
              plan: dict[str, Any] | None) -> None:
    run.mkdir()
    (run / "logs").mkdir()
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in event_lines)
    (run / "events.jsonl").write_text(text)
    (run / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in sample_lines))
    if plan is not None:
        (run / "plan.json").write_text(json.dumps(plan))
    (run / "logs" / "rank-0.log").write_text("2025-01-01T00:00:01.000000Z err boom\n")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def every_reader(run: Path) -> None:
    code, out, err = cli("monitor", str(run), "--json")
    assert code == 0, err
    snap = json.loads(out)
    assert isinstance(snap["ranks"], list) and isinstance(snap["problems"], list)
    assert all(line.startswith("distrun monitor: warning: ") for line in err.splitlines())
    code, _, err = cli("monitor", str(run), "--once")
    assert code == 0, err
    code, _, err = cli("report", str(run), "-o", str(run.parent / "report.html"))
    assert code == 0, err
    page = (run.parent / "report.html").read_text()
    assert "<img" not in page and "<script" not in page
    for extra in ((), ("--json",)):
        code, _, err = cli("diagnose", str(run), *extra)
        assert code in (0, 1), err


SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.timeout(600)
@SETTINGS
@given(event_lines=lines, sample_lines=samples)
def test_arbitrary_event_and_sample_lines(event_lines: list[Any], sample_lines: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_run(run, event_lines, sample_lines, PLAN)
        every_reader(run)


@pytest.mark.timeout(600)
@SETTINGS
@given(top=plan_fields, node=node_fields, whole=st.none() | json_values,
       event_lines=lines)
def test_arbitrary_plan_fields(top: dict[str, Any], node: dict[str, Any], whole: Any,
                               event_lines: list[Any]) -> None:
    plan: Any = {**PLAN, **top}
    if isinstance(plan.get("nodes"), list) and plan["nodes"] and isinstance(plan["nodes"][0],
                                                                             dict):
        plan["nodes"] = [{**plan["nodes"][0], **node}, *plan["nodes"][1:]]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_run(run, event_lines, [], whole if whole is not None else plan)
        every_reader(run)


@given(value=json_values)
def test_parse_event_never_raises(value: Any) -> None:
    parsed = parse_event(json.dumps(value), "events.jsonl", 7)
    if isinstance(parsed, BadLine):
        assert str(parsed).startswith("events.jsonl:7: ")


def test_bad_records_are_named_by_file_and_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run, [{"event": "launch_started", "pid": 1}, [1, 2],
                    {"event": "rank_joined", "rank": "x"}, {"event": "progress", "rank": 0}],
              [{"time": 1.0, "devices": [{"index": "<img src=x onerror=alert(1)>"}]}],
              {**PLAN, "nodes": "abc"})
    code, out, err = cli("monitor", str(run), "--json")
    assert code == 0
    assert err.splitlines() == [
        f"distrun monitor: warning: plan: {run / 'plan.json'}: nodes: Input should be a valid "
        "list",
        "distrun monitor: warning: events.jsonl:2: not a JSON object but list",
        "distrun monitor: warning: events.jsonl:3: bad rank_joined event: rank: Input should "
        "be a valid integer, unable to parse string as an integer",
        "distrun monitor: warning: samples.jsonl:1: bad sample: devices.0.index: Input should "
        "be a valid integer, unable to parse string as an integer"]
    snap = json.loads(out)
    assert snap["world_size"] is None and [r["rank"] for r in snap["ranks"]] == [0]
    assert read_plan(run / "plan.json").plan is None
