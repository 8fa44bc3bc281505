"""distrun's own stall record, as read from a run directory's events.jsonl
(:func:`distrun.diagnose.sources.read_run_info` reads the file once and hands each event here).

The watcher writes ``stalled`` (one per stuck rank, ``culprit`` true for the ranks it
blames) and ``stall_verdict`` (the culprits and a one-line message) when a job stops
making progress or loses a node, and ``hang`` (the culprits, the kind and a one-line
message) when the instrumented ranks' collectives stop progressing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def stall_of(event: dict[str, Any], when: float | None, number: int, path: Path
             ) -> StallEvent | None:
    """The stall an event records (its JSON fields), or None for any other event."""
    name = event.get("event")
    if name not in NAMES or (name == "stalled" and not event.get("culprit", True)):
        return None
    if name == "hang" and event.get("kind") == "gone":
        return None  # a rank that left: its own exit (or error) is the cause, not the wait
    raw = {"stall_verdict": event.get("ranks"), "hang": event.get("culprits")}.get(
        str(name), [event.get("rank")])
    ranks = tuple(int(r) for r in (raw or []) if isinstance(r, int | str) and str(r).isdigit())
    message = str(event.get("message") or f"rank(s) {', '.join(map(str, ranks))} stalled")
    return StallEvent(ranks, message, when, number, path, name in ("stall_verdict", "hang"))
