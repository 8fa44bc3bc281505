"""distrun's own stall record, read from a run directory's events.jsonl.

The watcher writes ``stalled`` (one per stuck rank, ``culprit`` true for the ranks it
blames) and ``stall_verdict`` (the culprits and a one-line message) when a job stops
making progress or loses a node, and ``hang`` (the culprits, the kind and a one-line
message) when the instrumented ranks' collectives stop progressing. The typed event
models (``distrun.model.record``) are used where that module exists; otherwise the JSON
lines are read by their event names, which are the same.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.diagnose.sources import is_run_dir, parse_time
from distrun.model.rundir import open_read

NAMES = ("stall_verdict", "stalled", "hang")


@dataclass(frozen=True)
class StallEvent:
    """A stall or lost node that distrun's watcher recorded."""

    ranks: tuple[int, ...]
    message: str
    time: float | None
    line: int
    file: Path
    verdict: bool = True  # False: one rank's ``stalled`` event


def read_stalls(paths: list[Path]) -> list[StallEvent]:
    """The stall records of every run directory given, in file order."""
    found: list[StallEvent] = []
    for path in paths:
        events = path / "events.jsonl"
        if is_run_dir(path):  # no events.jsonl, or not a regular one: nothing (_read)
            found.extend(_read(events))
    return found


def _read(path: Path) -> list[StallEvent]:
    found: list[StallEvent] = []
    try:
        with os.fdopen(open_read(path), "rb") as stream:
            for number, raw in enumerate(stream, start=1):
                if b"stall" in raw or b'"hang"' in raw:
                    event = _as_dict(raw, path, number)
                    stall = _stall(event, number, path) if event else None
                    found += [stall] if stall else []
    except OSError:
        return found
    return found


def _as_dict(raw: bytes, path: Path, number: int) -> dict[str, Any] | None:
    """The event as a dict: through the typed model when it exists, else plain JSON."""
    try:
        record: Any = importlib.import_module("distrun.model.record")
    except ImportError:
        record = None
    if record is not None and hasattr(record, "parse_event"):
        typed = record.parse_event(raw, path.name, number)
        dump = getattr(typed, "model_dump", None)
        return dump(mode="json") if callable(dump) else None
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _stall(event: dict[str, Any], number: int, path: Path) -> StallEvent | None:
    name = event.get("event")
    if name not in NAMES or (name == "stalled" and not event.get("culprit", True)):
        return None
    if name == "hang" and event.get("kind") == "gone":
        return None  # a rank that left: its own exit (or error) is the cause, not the wait
    raw = {"stall_verdict": event.get("ranks"), "hang": event.get("culprits")}.get(
        str(name), [event.get("rank")])
    ranks = tuple(int(r) for r in (raw or []) if isinstance(r, int | str) and str(r).isdigit())
    message = str(event.get("message") or f"rank(s) {', '.join(map(str, ranks))} stalled")
    when, _ = parse_time(str(event.get("time", "")) + " ")
    return StallEvent(ranks, message, when, number, path, name in ("stall_verdict", "hang"))
