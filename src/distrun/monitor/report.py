"""A self-contained HTML page of a run: loss, throughput per rank, device utilisation over
time, events, and a rank table where stragglers, idle devices and stalls stand out."""

from __future__ import annotations

import itertools
import json
import statistics
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from distrun.model import record
from distrun.model.record import Event, JobFinished, Progress, SampleLine, StallVerdict
from distrun.model.rundir import EVENTS, SAMPLES, RunDirError, read_bytes
from distrun.monitor import svg
from distrun.monitor.snapshot import failure_line, snapshot
from distrun.monitor.state import RunState

STRAGGLER = 0.8  # below this fraction of the median throughput a rank is a straggler
EVENT_COLOURS = {"stalled": "#d62728", "stall_verdict": "#d62728", "rank_exited": "#d62728",
                 "hang": "#d62728",
                 "job_finished": "#333", "verified": "#ff7f0e"}
TIMELINE = ("launch_started", "workers_started", "rank_joined", "verified", "stall_verdict",
            "hang", "rank_exited", "orphans_ended", "job_finished")


class Series:
    """Every time series the page plots, read once from the run directory."""

    def __init__(self, run: Path) -> None:
        self.events: list[Event] = record.events(run / EVENTS).read()
        self.samples: list[SampleLine] = record.samples(run / SAMPLES).read()
        times = [e.at for e in self.events]
        self.t0 = min((t for t in times if t is not None), default=0.0)
        self.t_end = max((t for t in times if t is not None), default=self.t0)
        self.loss: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.steps: dict[int, list[tuple[float, int]]] = defaultdict(list)
        for event in self.events:
            t = event.at
            if not isinstance(event, Progress) or t is None:
                continue
            self.steps[event.rank].append((t - self.t0, event.step or 0))
            loss = event.numbers().get("loss")
            if loss is not None:
                self.loss[f"rank {event.rank}"].append((t - self.t0, loss))

    def throughput(self) -> dict[str, list[tuple[float, float]]]:
        out = {}
        for rank, pts in sorted(self.steps.items()):
            rates = [((t0 + t1) / 2, (s1 - s0) / (t1 - t0))
                     for (t0, s0), (t1, s1) in itertools.pairwise(pts) if t1 > t0]
            if rates:
                out[f"rank {rank}"] = rates
        return out

    def mean_rate(self, rank: int) -> float | None:
        pts = self.steps.get(rank, [])
        if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
            return None
        return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

    def utilisation(self) -> tuple[str, dict[str, list[tuple[float, float]]]]:
        devices: dict[str, list[tuple[float, float]]] = defaultdict(list)
        cpu: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for s in self.samples:
            t = s.time - self.t0
            for d in s.devices:
                if d.utilization_percent is not None:
                    devices[f"device {d.index}"].append((t, d.utilization_percent))
            for rank, r in s.ranks.items():
                if r.cpu_percent is not None:
                    cpu[f"rank {rank}"].append((t, r.cpu_percent))
        if devices:
            return "Device utilisation (%)", dict(devices)
        return "CPU use per rank process (%) - stands in for device utilisation", dict(cpu)

    def marks(self) -> list[tuple[float, str, str]]:
        out = []
        for e in self.events:
            t = e.at
            if e.event not in TIMELINE or t is None:
                continue
            rank = getattr(e, "rank", None)
            label = e.event + (f" rank {rank}" if isinstance(rank, int) else "")
            if isinstance(e, StallVerdict):
                label = f"STALL: ranks {e.ranks}"
            elif isinstance(e, JobFinished):
                label = f"finished: {e.status} ({e.exitcode})"
            out.append((t - self.t0, label, EVENT_COLOURS.get(e.event, "#1f77b4")))
        return out


def rank_rows(snap: dict[str, Any], series: Series) -> list[dict[str, Any]]:
    rates = {r["rank"]: series.mean_rate(r["rank"]) for r in snap["ranks"]}
    known = [v for v in rates.values() if v]
    median = statistics.median(known) if known else None
    rows = []
    for r in snap["ranks"]:
        rate = rates[r["rank"]]
        flags = []
        if r["status"] == "quiet":
            flags.append("no heartbeat")
        if median and rate is not None and rate < STRAGGLER * median:
            flags.append(f"STRAGGLER ({rate / median:.0%} of median)")
        if r["status"] == "stalled":
            flags.append("holds the others up")
        if r["rank"] == snap["first_failure"] and snap["status"] != "stalled":
            flags.append("FAILED FIRST")
        rows.append({**r, "mean_steps_per_second": rate, "flags": flags})
    return rows


def _cell(value: Any, spec: str = "") -> str:
    return "n/a" if value is None else escape(f"{value:{spec}}")


def _table(rows: list[dict[str, Any]], snap: dict[str, Any]) -> str:
    head = ("rank", "node", "local rank", "device", "pid", "last step", "steps/s (mean)",
            "last loss", "status")
    body = []
    for r in rows:
        cls = ' class="bad"' if r["flags"] else ""
        status = "; ".join([r["status"], *r["flags"]])
        body.append(f"<tr{cls}><td>{_cell(r['rank'])}</td><td>{_cell(r['node_rank'])}</td>"
                    f"<td>{_cell(r['local_rank'])}</td><td>{_cell(r['device'])}</td>"
                    f"<td>{_cell(r['pid'])}</td><td>{_cell(r['step'])}</td>"
                    f"<td>{_cell(r['mean_steps_per_second'], '.2f')}</td>"
                    f"<td>{_cell(r['loss'], '.4g')}</td><td>{escape(status)}</td></tr>")
    for d in snap["devices"]:
        if not d["ranks"]:
            body.append(f'<tr class="bad"><td>-</td><td>{_cell(snap["node_rank"])}</td><td>-</td>'
                        f'<td>{escape(str(snap["device_type"]))} {_cell(d["index"])}</td>'
                        '<td colspan="4"></td><td>IDLE: no rank uses this device</td></tr>')
    cols = "".join(f"<th>{h}</th>" for h in head)
    return (f'<table id="ranks"><thead><tr>{cols}</tr></thead><tbody>{"".join(body)}'
            "</tbody></table>")


CSS = """body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}
tr.bad td{background:#fde2e1;font-weight:bold}.verdict{background:#fde2e1;padding:8px}
.chart{display:block;margin:12px 0}ul.checks li.warning,ul.checks li.error{color:#b00}"""


def _by_rank(series: dict[str, list[tuple[float, float]]]) -> dict[str, list[tuple[float, float]]]:
    """Legend in rank / device order: "rank 2" before "rank 10"."""
    def key(name: str) -> tuple[str, int]:
        head, _, tail = name.rpartition(" ")
        return (head, int(tail)) if tail.isdigit() else (name, -1)

    return {k: series[k] for k in sorted(series, key=key)}


def render(run: Path) -> str:
    state = RunState(run)
    state.refresh()
    snap = snapshot(state)
    series = Series(run)
    util_title, util = series.utilisation()
    charts = [
        svg.line_chart("Loss", _by_rank(series.loss), "seconds since launch", "loss", "loss"),
        svg.line_chart("Throughput per rank", _by_rank(series.throughput()), "seconds since launch",
                       "steps per second", "throughput"),
        svg.line_chart(util_title, _by_rank(util), "seconds since launch", "percent",
                       "utilisation"),
        svg.timeline("Events", series.marks(), series.t_end - series.t0, "events"),
    ]
    verdict = (f'<p class="verdict">STALLED: {escape(snap["verdict"])}</p>'
               if snap["verdict"] else "")
    failure = failure_line(snap)
    if failure:
        verdict += f'<p class="verdict" id="failure">{escape(failure)}</p>'

    checks = "".join(f'<li class="{escape(str(c["severity"]))}">{escape(str(c["message"]))}'
                     "</li>" for c in snap["checks"])
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>distrun report: "
            f"{escape(run.name)}</title><style>{CSS}</style></head><body>"
            f"<h1>distrun report: {escape(run.name)}</h1>"
            f"<p>status <b>{escape(str(snap['status']))}</b> (exit status "
            f"{_cell(snap['exitcode'])}), {_cell(snap['world_size'])} ranks, backend "
            f"{_cell(snap['backend'])}, device {_cell(snap['device_type'])}, node "
            f"{_cell(snap['node_rank'])}</p>{verdict}<h2>Ranks</h2>{_table(rank_rows(snap, series), snap)}"
            f"<h2>Verification</h2><ul class='checks'>{checks or '<li>none recorded</li>'}</ul>"
            f"{_hangs(series, run)}"
            f"<h2>Plots</h2>{''.join(charts)}{_problems(snap['problems'])}</body></html>\n")


def _hangs(series: Series, run: Path) -> str:
    """Each hang the instrumentation named (culprit, collective, kind) and, from hang.json,
    the culprits' stacks; every value escaped."""
    items = [f"<li>{escape(str(getattr(e, 'message', '') or 'a hang'))}</li>"
             for e in series.events if e.event == "hang"]
    if not items:
        return ""
    return (f"<h2>Hangs</h2><ul class='hangs'>{''.join(items)}</ul>"
            f"{_stacks(run / 'hang.json')}")


def _stacks(path: Path) -> str:
    try:
        data = json.loads(read_bytes(path, limit=4_000_000).decode("utf-8", errors="replace"))
    except RunDirError as exc:  # a FIFO or a link in its place: never read, said
        return f"<p class='problems'>{escape(str(exc))}</p>"
    except (OSError, ValueError, RecursionError):
        return ""
    stacks = data.get("stacks") if isinstance(data, dict) else None
    if not isinstance(stacks, dict):
        return ""
    return "".join(
        f"<h3>stack of rank {escape(str(rank))}</h3><pre>"
        f"{escape(str(s.get('text', ''))[-8000:] if isinstance(s, dict) else '')}</pre>"
        for rank, s in sorted(stacks.items(), key=lambda kv: str(kv[0])))


def _problems(problems: list[str]) -> str:
    if not problems:
        return ""
    items = "".join(f"<li>{escape(p)}</li>" for p in problems)
    return f"<h2>Records that could not be read</h2><ul class='problems'>{items}</ul>"
