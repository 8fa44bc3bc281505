"""What the engine reads: run directories, torchelastic error files, plain logs.

A *run directory* is what ``distrun launch`` writes::

    plan.json, events.jsonl, logs/rank-<R>.log, logs/launcher.log,
    torchrun/<run_id>/attempt_<n>/<local_rank>/error.json

Any other directory is searched for log files; any other file is a log.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from distrun.diagnose.stalls import NAMES as STALL_NAMES
from distrun.diagnose.stalls import StallEvent, stall_of
from distrun.model.record import (
    FIRST_ROLE,
    BadLine,
    Event,
    JobFinished,
    RankExited,
    RankOom,
    WorkersStarted,
    parse_event,
    read_plan,
)
from distrun.model.rundir import RunDirError, not_regular, open_read

LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".stderr", ".stdout")

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
    first: bool = False  # the launcher named it the first failure (cause before consequence)


@dataclass
class RunInfo:
    """Facts about the run from plan.json and events.jsonl (empty for plain logs)."""

    events_path: Path | None = None
    nodes: dict[int, str] = field(default_factory=dict)  # rank -> host
    local_ranks: dict[tuple[int, int], int] = field(default_factory=dict)  # (node, local) -> rank
    exits: list[RankExit] = field(default_factory=list)
    job_exitcode: int | None = None
    problems: list[str] = field(default_factory=list)  # unreadable records: file:line: why
    ooms: list[RankOom] = field(default_factory=list)  # out-of-memory records, in file order
    stalls: list[StallEvent] = field(default_factory=list)  # distrun's stall/hang records

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
    return path.is_dir() and (regular(path / "events.jsonl") or (path / "logs").is_dir())


def regular(path: Path) -> bool:
    """A regular file, not a link to one: a file found inside a folder (a run directory on
    shared storage) is read only then; a link planted there is never followed."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def rank_from_name(path: Path) -> int | None:
    found = _RANK_FILE.search(path.name)
    return int(found.group(1)) if found else None


def log_files(path: Path) -> list[LogFile]:
    """The files to scan under ``path`` (a run dir, any dir, or a file)."""
    if path.is_file():
        return [LogFile(path, rank_from_name(path), path.name.startswith("launcher"))]
    if is_run_dir(path):
        return _run_dir_files(path)
    files = sorted(p for p in path.rglob("*") if regular(p) and _looks_like_log(p))
    return [LogFile(p, rank_from_name(p), p.name.startswith("launcher")) for p in files]


def _looks_like_log(path: Path) -> bool:
    return path.suffix in LOG_SUFFIXES or path.name == "error.json"


def _run_dir_files(run: Path) -> list[LogFile]:
    files: list[LogFile] = []
    for log in sorted(_checked(p) for p in (run / "logs").glob("*.log")):
        launcher = log.name.startswith("launcher")
        files.append(LogFile(log, None if launcher else rank_from_name(log), launcher))
    files.extend(LogFile(_checked(p)) for p in sorted(run.glob("torchrun/**/error.json")))
    return files


def _checked(path: Path) -> Path:
    """A log of a run directory, which must be a regular file: a link, a FIFO or a folder in
    its place is a ``RunDirError`` naming it (never followed, never blocking)."""
    mode = path.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise not_regular(path, mode)
    return path


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
    except (OSError, ValueError, RecursionError):
        return None


def _read_plan(path: Path, info: RunInfo) -> None:
    read = read_plan(path)
    if read.plan is None:
        if path.exists():
            info.problems.append(f"plan: {read.error}")
        return
    for node in read.plan.nodes:
        for local, rank in enumerate(node.ranks):
            info.nodes[rank] = node.host
            info.local_ranks[(node.node_rank, local)] = rank


def _read_events(path: Path, info: RunInfo) -> None:
    try:  # a link, a FIFO or a folder in its place is a RunDirError naming it
        stream = os.fdopen(open_read(path), "rb")
    except FileNotFoundError:
        return
    except RunDirError:
        raise
    except OSError as exc:
        info.events_path = path
        info.problems.append(f"{path}: cannot read ({exc.strerror})")
        return
    info.events_path = path
    with stream:
        for number, raw in enumerate(stream, start=1):
            event = parse_event(raw, path.name, number)
            if isinstance(event, BadLine):
                info.problems.append(str(event))
                continue
            text = raw[:2000].decode("utf-8", errors="replace").rstrip("\n")
            _apply_event(event, number, text, info)
            if event.event in STALL_NAMES and (
                    stall := stall_of(event.fields(), event.at, number, path)) is not None:
                info.stalls.append(stall)


def _apply_event(event: Event, number: int, text: str, info: RunInfo) -> None:
    if isinstance(event, WorkersStarted):
        for rank, where in event.ranks.items():
            info.nodes[rank] = where.host or ""
            info.local_ranks[(where.node_rank or 0, where.local_rank or 0)] = rank
    elif isinstance(event, RankExited):
        info.exits.append(RankExit(event.rank, event.exitcode, event.signal, event.at,
                                   number, text, event.role == FIRST_ROLE))
    elif isinstance(event, JobFinished):
        info.job_exitcode = event.exitcode
    elif isinstance(event, RankOom) and all(o.rank != event.rank for o in info.ooms):
        info.ooms.append(event)


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


def iter_paths(paths: list[Path]) -> Iterator[LogFile]:
    for path in paths:
        yield from log_files(path)
