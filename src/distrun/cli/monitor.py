"""``distrun monitor [RUN_DIR]``: a live view of a job from its run directory.

Per node and rank: device, utilisation, memory, step, steps per second, loss, age of the
last heartbeat; idle devices and stalls highlighted. ``--json`` prints one snapshot,
``--once`` the table once, ``--metrics-port`` serves Prometheus metrics (units in names).
RUN_DIR defaults to the newest run under ./runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from distrun.cli import exitcodes
from distrun.cli.args import OneLineParser, check_ranges
from distrun.cli.render import Console
from distrun.cli.watchflags import seconds
from distrun.errors import UsageError
from distrun.model.record import printable
from distrun.model.rundir import EVENTS, RunDirError, open_read
from distrun.monitor.snapshot import failure_line, problems, snapshot
from distrun.monitor.state import RunState, latest_run

NA = "n/a"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="distrun monitor", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", help="the run directory (default: newest under ./runs)")
    p.add_argument("--json", action="store_true", help="print one snapshot as JSON and exit")
    p.add_argument("--once", action="store_true", help="print the table once and exit")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    p.add_argument("--metrics-addr", default="127.0.0.1", help="address for --metrics-port")
    p.add_argument("--interval", type=seconds, default=1.0, help="refresh every N s (1)")
    p.add_argument("--stall-timeout", type=seconds, default=30.0,
                   help="highlight ranks whose heartbeat is older than this (30)")
    return p


def resolve(run_dir: str | None, env: Mapping[str, str], command: str = "monitor") -> Path:
    """The run directory ``distrun <command>`` reads: the one given, else the newest under
    ./runs (DISTRUN_RUNS); its events.jsonl must be a regular file (checked without blocking
    on a FIFO or following a link)."""
    if run_dir is None:
        root = env.get("DISTRUN_RUNS", "runs")
        found = latest_run(Path(root))
        if found is None:
            raise UsageError(f"no run directory given and none under {root}",
                             fix=f"pass the run directory: distrun {command} runs/<run>")
        return _checked(found, str(found))
    return _checked(Path(run_dir), run_dir)


def _checked(path: Path, given: str) -> Path:
    try:
        os.close(open_read(path / EVENTS))
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"{given!r} is not a distrun run directory (no {EVENTS})",
                         fix="pass the folder distrun launch printed (runs/<time>-<name>)"
                         ) from None
    except RunDirError as exc:
        raise UsageError(str(exc)) from None
    return path


def main(argv: list[str]) -> int:
    ns = parser().parse_args(argv)
    check_ranges(ns)
    state = RunState(resolve(ns.run_dir, os.environ))
    state.refresh()
    warn(problems(state))
    if ns.json:
        print(json.dumps(snapshot(state, stall_timeout_s=ns.stall_timeout), indent=2))
        return exitcodes.OK
    console = Console()
    if ns.once:
        console.print(table(snapshot(state, stall_timeout_s=ns.stall_timeout), console.width))
        return exitcodes.OK
    if ns.metrics_port is not None:
        serve_metrics(state, ns.metrics_port, ns.metrics_addr, ns.stall_timeout)
    return live(state, console, ns.interval, ns.stall_timeout)


def warn(lines: list[str]) -> None:
    """What could not be read, one line each on stderr: the rest is still shown."""
    for line in lines:
        print(f"distrun monitor: warning: {printable(line)}", file=sys.stderr)


def live(state: RunState, console: Console, interval: float, timeout: float) -> int:
    from rich.live import Live

    try:
        with Live(table(snapshot(state, stall_timeout_s=timeout), console.width), console=console,
                  auto_refresh=False) as view:
            while True:
                time.sleep(interval)
                state.refresh()
                view.update(table(snapshot(state, stall_timeout_s=timeout), console.width),
                            refresh=True)
    except KeyboardInterrupt:
        return exitcodes.OK


def _fmt(value: Any, spec: str = "", unit: str = "") -> str:
    return NA if value is None else f"{value:{spec}}{unit}"


def _gib(value: Any) -> str:
    return NA if value is None else f"{value / 2**30:.1f}G"


# (header, keep order: lower goes first when the screen is narrow, justify)
COLUMNS: tuple[tuple[str, int, str], ...] = (
    ("node", 2, "right"), ("rank", 9, "right"), ("local", 1, "right"),
    ("device", 4, "left"), ("util", 5, "right"), ("mem", 3, "right"), ("step", 8, "right"),
    ("step/s", 7, "right"), ("loss", 6, "right"), ("beat", 5, "right"), ("cpu", 0, "right"),
    ("status", 9, "left"),
)
STYLES = {"stalled": "bold red", "quiet": "yellow"}


def _rank_cells(r: dict[str, Any], d: dict[str, Any]) -> list[str | Text]:
    return [_fmt(r["node_rank"]), str(r["rank"]), _fmt(r["local_rank"]), r["device"] or NA,
            _util(d), _mem(d), _fmt(r["step"]), _fmt(r["steps_per_second"], ".2f"),
            _fmt(r["loss"], ".4g"), _fmt(r["heartbeat_age_s"], ".1f", "s"),
            _fmt(r["cpu_percent"], ".0f", "%"), r["status"]]


def rows(snap: dict[str, Any]) -> list[tuple[list[str | Text], str | None]]:
    """Every row's cells (one per COLUMNS entry) and style."""
    by_rank = {r: d for d in snap["devices"] for r in d["ranks"]}
    out: list[tuple[list[str | Text], str | None]] = []
    for r in snap["ranks"]:
        style = STYLES.get(r["status"], "dim" if r["status"].startswith("exited") else None)
        out.append((_rank_cells(r, by_rank.get(r["rank"], {})), style))
    for d in snap["devices"]:
        if not d["ranks"]:
            out.append(([_fmt(snap["node_rank"]), "-", "-", f"{snap['device_type']} {d['index']}",
                         _util(d), _mem(d), "", "", "", "", "", "IDLE: no rank"], "bold yellow"))
    return out


def fitting(widths: list[int], room: int) -> list[int]:
    """The columns kept (indexes): all when they fit in ``room``, else the lowest-kept
    dropped first. A cell is never cut: a number shown is the whole number."""
    keep = list(range(len(COLUMNS)))
    for drop in sorted(keep, key=lambda i: COLUMNS[i][1]):
        if sum(widths[i] + 3 for i in keep) + 1 <= room or len(keep) <= 1:
            break
        keep.remove(drop)
    return keep


def table(snap: dict[str, Any], width: int = 200) -> Table:
    body = rows(snap)
    widths = [max([len(h), *(len(str(c[i])) for c, _ in body)])
              for i, (h, _, _) in enumerate(COLUMNS)]
    keep = fitting(widths, width)
    t = Table(title=_title(snap), title_justify="left")
    for i in keep:
        head, _, justify = COLUMNS[i]
        t.add_column(head, justify=justify, no_wrap=True, min_width=widths[i],  # type: ignore[arg-type]
                     overflow="fold")
    for cells, style in body:
        t.add_row(*(c if isinstance(c, Text) else Text(c) for c in (cells[i] for i in keep)),
                  style=style)
    return t


def _util(d: dict[str, Any]) -> Text:
    if not d:
        return Text(NA)
    text = _fmt(d.get("utilization_percent"), ".0f", "%")
    return Text(text, style="bold yellow") if d.get("idle") else Text(text)


def _mem(d: dict[str, Any]) -> str:
    if not d or d.get("memory_used_bytes") is None:
        return NA
    return f"{_gib(d['memory_used_bytes'])}/{_gib(d.get('memory_total_bytes'))}"


def _title(snap: dict[str, Any]) -> Text:
    """Run-directory text is never markup (a path or a message may hold ``[...]``)."""
    text = Text(f"{snap['run_dir']}  {snap['status']}  {snap['world_size']} ranks "
                f"({snap['backend']}, {snap['device_type']})")
    if snap.get("devices_unavailable"):
        text.append(f"\ndevice metrics not available: {snap['devices_unavailable']}")
    if snap.get("verdict"):
        text.append(f"\nSTALLED: {snap['verdict']}", style="bold red")
    failure = failure_line(snap)
    if failure:
        text.append(f"\n{failure}", style="bold red")
    return text


RANK_GAUGES = (
    ("distrun_rank_step", "step", "last step the rank reported"),
    ("distrun_rank_steps_per_second", "steps_per_second", "recent steps per second"),
    ("distrun_rank_loss", "loss", "last loss the rank reported"),
    ("distrun_rank_heartbeat_age_seconds", "heartbeat_age_s", "seconds since the last step"),
    ("distrun_rank_cpu_percent", "cpu_percent", "CPU use of the rank's process"),
    ("distrun_rank_resident_memory_bytes", "rss_bytes", "resident memory of the process"),
)
DEVICE_GAUGES = (
    ("distrun_device_utilization_percent", "utilization_percent", "device utilisation"),
    ("distrun_device_memory_used_bytes", "memory_used_bytes", "device memory used"),
    ("distrun_device_memory_total_bytes", "memory_total_bytes", "device memory total"),
)


class Collector:
    """Metrics from a fresh snapshot at every scrape; a value not available is left out."""

    def __init__(self, state: RunState, timeout: float) -> None:
        self.state, self.timeout = state, timeout

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        self.state.refresh()
        snap = snapshot(self.state, stall_timeout_s=self.timeout)
        for name, key, text in RANK_GAUGES:
            g = GaugeMetricFamily(name, text, labels=["node", "rank"])
            for r in snap["ranks"]:
                if r[key] is not None:
                    g.add_metric([str(r["node_rank"]), str(r["rank"])], float(r[key]))
            yield g
        stalled = GaugeMetricFamily("distrun_rank_stalled", "1 when the rank is stalled",
                                    labels=["node", "rank"])
        for r in snap["ranks"]:
            stalled.add_metric([str(r["node_rank"]), str(r["rank"])],
                               float(r["status"] in ("stalled", "quiet")))
        yield stalled
        for name, key, text in DEVICE_GAUGES:
            g = GaugeMetricFamily(name, text, labels=["node", "device"])
            for d in snap["devices"]:
                if d.get(key) is not None:
                    g.add_metric([str(snap["node_rank"]), str(d["index"])], float(d[key]))
            yield g


def serve_metrics(state: RunState, port: int, addr: str, timeout: float) -> None:
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError:
        raise UsageError("--metrics-port needs prometheus_client, which is not installed",
                         fix="pip install prometheus-client") from None
    registry = CollectorRegistry()
    registry.register(Collector(state, timeout))
    try:
        start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise UsageError(f"--metrics-port {port}: {exc.strerror}",
                         fix="pick a free port") from None
    print(f"distrun monitor: Prometheus metrics on http://{addr}:{port}/metrics",
          file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
