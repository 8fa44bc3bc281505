"""The HTML report escapes every value that reaches it: hostile text in a run directory (a
device name, a message, a status, the folder's own name) is shown, never run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.model.plan import Request
from distrun.monitor.report import render
from distrun.plan.planner import build

PAYLOADS = ("<img src=x onerror=\"document.title='pwned'\">",
            "<script>document.title='pwned'</script>",
            "\"><svg onload=document.title='pwned'>",
            "' onmouseover='document.title=1")
T0 = "2025-01-01T00:00:0{}.000000Z"


def hostile_run(root: Path) -> Path:
    run = root / "<img src=x onerror=document.title=1>"
    (run / "logs").mkdir(parents=True)
    bad = " ".join(PAYLOADS)
    plan = build(Request(script="train.py", nproc_per_node="2"),
                 parse_declared("1x2xH100-80GB"))
    (run / "plan.json").write_text(json.dumps(
        {**plan.model_dump(mode="json"), "device_type": bad, "backend": bad}))
    events = [
        {"event": "launch_started", "time": T0.format(0), "pid": 1, "node_rank": 0},
        {"event": "workers_started", "time": T0.format(1),
         "ranks": {"0": {"local_rank": 0, "node_rank": 0, "host": bad}}},
        {"event": "rank_joined", "time": T0.format(2), "rank": 0, "device": bad, "host": bad},
        {"event": "progress", "time": T0.format(3), "rank": 0, "step": 1, "metrics": {"loss": 1}},
        {"event": "progress", "time": T0.format(4), "rank": 0, "step": 2, "metrics": {"loss": 0}},
        {"event": "verified", "time": T0.format(5), "check": bad, "severity": bad,
         "message": bad},
        {"event": "stall_verdict", "time": T0.format(6), "ranks": [0], "message": bad},
        {"event": "hang", "time": T0.format(6), "culprits": [0], "kind": bad, "message": bad},
        {"event": "rank_exited", "time": T0.format(7), "rank": 0, "exitcode": 1,
         "role": "first failure"},
        {"event": "job_finished", "time": T0.format(7), "status": bad, "exitcode": 1,
         "message": bad},
    ]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    samples = [{"time": 1735689604.0 + i, "unavailable": bad, "devices": [
        {"index": 0, "name": bad, "utilization_percent": 50, "pids": [], "note": bad,
         "source": bad}, {"index": "<img src=x onerror=alert(1)>"}],
        "ranks": {"0": {"cpu_percent": 10}}} for i in range(2)]
    (run / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (run / "hang.json").write_text(json.dumps({"stacks": {"0": {"method": bad, "text": bad}}}))
    return run


def test_hostile_values_are_escaped(tmp_path: Path) -> None:
    page = render(hostile_run(tmp_path))
    assert "<img" not in page and "<script" not in page
    assert "&lt;img src=x onerror=&quot;document.title=&#x27;pwned&#x27;&quot;&gt;" in page
    assert "&lt;script&gt;" in page
    assert '<p class="verdict" id="failure">rank 0 failed first (&lt;img src=x' in page
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b",
                    "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "svg", "text",
                    "rect", "line", "polyline", "circle", "h3", "pre"}, tags


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium not installed")
@pytest.mark.timeout(90)
def test_hostile_values_do_not_run_in_chromium(tmp_path: Path) -> None:
    run = hostile_run(tmp_path)
    page = tmp_path / "report.html"
    page.write_text(render(run))
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         page.as_uri()], capture_output=True, text=True, timeout=60, check=False).stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title is not None, dom[:500]
    assert title.group(1) == "distrun report: &lt;img src=x onerror=document.title=1&gt;"
    assert "<img" not in dom and "<script" not in dom
    assert "document.title='pwned'" in dom  # shown as text


def test_the_hang_and_its_stack_are_on_the_page(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "events.jsonl").write_text(json.dumps(
        {"event": "hang", "time": T0.format(1), "culprits": [2], "kind": "idle",
         "message": "rank 2 hung outside collective #5 (gloo:all_reduce)"}) + "\n")
    (run / "hang.json").write_text(json.dumps(
        {"stacks": {"2": {"method": "py-spy", "text": "time.sleep (sleeper.py:18)"}}}))
    page = render(run)
    assert "<h2>Hangs</h2>" in page and "rank 2 hung outside collective #5" in page
    assert "stack of rank 2" in page and "sleeper.py:18" in page
