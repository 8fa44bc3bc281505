"""What the engine reads: run directories, torchelastic error files, plain logs.

A *run directory* is what ``distrun launch`` writes::

    plan.json, events.jsonl, logs/rank-<R>.log, logs/launcher.log,
    torchrun/<run_id>/attempt_<n>/<local_rank>/error.json

Any other directory is searched for log files; any other file is a log.
"""

from __future__ import annotations

import io
import json
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".stderr", ".stdout")
SNIFF_BYTES = 64 * 1024
UTF16_MAX_BYTES = 256 << 20
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class InputError(ValueError):
    """A path diagnose cannot read as logs: what it is, and the fix."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"{what}; fix: {fix}")

_RANK_FILE = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_TIME = re.compile(
    r"^\s*(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?\s+"
    r"(?:(?:out|err)\s+)?"
)


@dataclass(frozen=True)
class LogFile:
    """One file to scan; ``rank`` when the file belongs to one rank."""

    path: Path
    rank: int | None = None
    is_launcher: bool = False


@dataclass(frozen=True)
class RankExit:
    """A ``rank_exited`` event."""

    rank: int
    exitcode: int
    signal: str | None
    time: float | None
    line: int
    text: str


@dataclass(frozen=True)
class StallEvent:
    """A stall or lost node that distrun's own watcher recorded (``stall_verdict``)."""

    ranks: tuple[int, ...]
    message: str
    time: float | None
    line: int
    verdict: bool = True  # False: one rank's ``stalled`` event


@dataclass
class RunInfo:
    """Facts about the run from plan.json and events.jsonl (empty for plain logs)."""

    events_path: Path | None = None
    nodes: dict[int, str] = field(default_factory=dict)  # rank -> host
    local_ranks: dict[tuple[int, int], int] = field(default_factory=dict)  # (node, local) -> rank
    exits: list[RankExit] = field(default_factory=list)
    job_exitcode: int | None = None
    stalls: list[StallEvent] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        bad_exit = any(e.exitcode != 0 for e in self.exits)
        return bad_exit or bool(self.job_exitcode)


def parse_time(text: str) -> tuple[float | None, str]:
    """Split a leading ISO-8601 timestamp (and out/err tag) off a line: (epoch, rest)."""
    found = _TIME.match(text)
    if found is None:
        return None, text
    day, clock, frac, zone = found.groups()
    fraction = (frac or "0")[:6].ljust(6, "0")
    offset = "+00:00" if zone in (None, "Z") else zone
    if len(offset) == 5:
        offset = offset[:3] + ":" + offset[3:]
    try:
        stamp = datetime.fromisoformat(f"{day}T{clock}.{fraction}{offset}")
    except ValueError:
        return None, text
    return stamp.timestamp(), text[found.end() :]


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and ((path / "events.jsonl").is_file() or (path / "logs").is_dir())


def rank_from_name(path: Path) -> int | None:
    found = _RANK_FILE.search(path.name)
    return int(found.group(1)) if found else None


def log_files(path: Path) -> list[LogFile]:
    """The files to scan under ``path`` (a run dir, any dir, or a file)."""
    if path.is_file():
        return [LogFile(path, rank_from_name(path), path.name.startswith("launcher"))]
    if is_run_dir(path):
        return _run_dir_files(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and _looks_like_log(p))
    return [LogFile(p, rank_from_name(p), p.name.startswith("launcher")) for p in files]


def _looks_like_log(path: Path) -> bool:
    return path.suffix in LOG_SUFFIXES or path.name == "error.json"


def _run_dir_files(run: Path) -> list[LogFile]:
    files: list[LogFile] = []
    for log in sorted((run / "logs").glob("*.log")):
        launcher = log.name.startswith("launcher")
        files.append(LogFile(log, None if launcher else rank_from_name(log), launcher))
    files.extend(LogFile(p) for p in sorted(run.glob("torchrun/**/error.json")))
    return files


def read_run_info(paths: list[Path]) -> RunInfo:
    """Merge plan.json and events.jsonl of every run directory given."""
    info = RunInfo()
    for path in paths:
        if not is_run_dir(path):
            continue
        _read_plan(path / "plan.json", info)
        _read_events(path / "events.jsonl", info)
    return info


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _read_plan(path: Path, info: RunInfo) -> None:
    plan = _load_json(path)
    if not isinstance(plan, dict):
        return
    for node in plan.get("nodes") or []:
        if not isinstance(node, dict):
            continue
        for local, rank in enumerate(node.get("ranks") or []):
            info.nodes[int(rank)] = str(node.get("host", ""))
            info.local_ranks[(int(node.get("node_rank", 0)), local)] = int(rank)


def _read_events(path: Path, info: RunInfo) -> None:
    if not path.is_file():
        return
    info.events_path = path
    with path.open(encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            _apply_event(_parse_event(line), number, line.rstrip("\n"), info)


def _parse_event(line: str) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def _apply_event(event: dict[str, Any], number: int, text: str, info: RunInfo) -> None:
    name = event.get("event")
    when, _ = parse_time(str(event.get("time", "")) + " ")
    if name == "workers_started":
        for rank, where in (event.get("ranks") or {}).items():
            info.nodes[int(rank)] = str(where.get("host", ""))
            key = (int(where.get("node_rank", 0)), int(where.get("local_rank", 0)))
            info.local_ranks[key] = int(rank)
    elif name == "rank_exited" and event.get("rank") is not None:
        code = int(event.get("exitcode") or 0)
        exit_ = RankExit(int(event["rank"]), code, event.get("signal"), when, number, text)
        info.exits.append(exit_)
    elif name == "job_finished":
        info.job_exitcode = int(event.get("exitcode") or 0)
    elif name in ("stall_verdict", "stalled"):
        _apply_stall(event, name, when, number, info)


def _apply_stall(event: dict[str, Any], name: str, when: float | None, number: int,
                 info: RunInfo) -> None:
    """``stall_verdict`` names the culprits; ``stalled`` (one per rank) counts when it is alone."""
    if name == "stalled" and not event.get("culprit", True):
        return
    raw = event.get("ranks") if name == "stall_verdict" else [event.get("rank")]
    ranks = tuple(int(r) for r in (raw or []) if isinstance(r, int | str) and str(r).isdigit())
    message = str(event.get("message") or f"rank(s) {', '.join(map(str, ranks))} stalled")
    info.stalls.append(StallEvent(ranks, message, when, number, name == "stall_verdict"))


@dataclass(frozen=True)
class ErrorFileText:
    """The lines of a torchelastic error.json, with its rank and time."""

    lines: list[str]
    local_rank: int | None
    time: float | None


def read_error_file(path: Path) -> ErrorFileText:
    """Flatten torchelastic's error.json (see torch's errors/error_handler.py)."""
    data = _load_json(path)
    local = int(path.parent.name) if path.parent.name.isdigit() else None
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, str):
        return ErrorFileText(message.splitlines(), local, None)
    if not isinstance(message, dict):
        return ErrorFileText([], local, None)
    extra = message.get("extraInfo") or {}
    lines = str(message.get("message", "")).splitlines()
    lines += str(extra.get("py_callstack", "")).splitlines()
    stamp = str(extra.get("timestamp", ""))
    # torchelastic stores whole seconds: the failure happened within that second.
    when = int(stamp) + 0.999 if stamp.isdigit() else None
    return ErrorFileText(lines, local, when)


def check_path(path: Path) -> None:
    """Raise InputError unless ``path`` is a run/log directory or a readable text file."""
    if not path.exists():
        raise InputError(f"{path} does not exist",
                         "pass a run directory (runs/<time>-<name>/) or a log file that exists")
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        if not log_files(path):
            raise InputError(f"{path} holds no log files ({', '.join(LOG_SUFFIXES)}, error.json)",
                             "pass the run directory or the log files themselves")
        return
    if not stat.S_ISREG(mode):
        raise InputError(f"{path} is not a regular file (a FIFO, device or socket)",
                         "save the output to a file first, e.g. ... 2>&1 | tee train.log")
    try:
        with path.open("rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError as err:
        raise InputError(f"{path} cannot be read ({err.strerror})", "check its permissions") from err
    if b"\0" in head and not head.startswith(_UTF16_BOMS):
        raise InputError(f"{path} is binary (NUL bytes in its first 64 KiB), not a text log",
                         "pass the text log the job wrote (stdout/stderr, logs/rank-<R>.log)")


def open_log(path: Path) -> io.BufferedIOBase:
    """The file as UTF-8 bytes: UTF-16 logs (Windows PowerShell redirects) are re-encoded."""
    stream = path.open("rb")
    if stream.read(2) not in _UTF16_BOMS:
        stream.seek(0)
        return stream
    with stream:
        stream.seek(0)
        text = stream.read(UTF16_MAX_BYTES).decode("utf-16", "replace")
    return io.BytesIO(text.encode("utf-8"))


def iter_paths(paths: list[Path]) -> Iterator[LogFile]:
    for path in paths:
        yield from log_files(path)
