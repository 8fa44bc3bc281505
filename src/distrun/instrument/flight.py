"""Reading torch's Flight Recorder from inside a rank (docs/instrument.md, "Why the Flight
Recorder").

Two reads, of very different cost (measured with torch 2.13, gloo, 2000 recorded entries):

- :func:`status`: ``_dump_fr_trace_json(includeCollectives=False)``: per process group the
  last enqueued / completed collective sequence number (``pg_status``); about 20 us. Read
  every tick.
- :func:`describe`: the full trace without stacks (``_dump_fr_trace``, pickled), searched
  for one collective's op, sizes and timeout; about 0.1 s for 2000 entries. Only for a
  collective that has been in flight for seconds, and rate-limited by the caller.

gloo's ``pg_status`` counts every op of the group, point-to-point ones included (they make no
entry): its numbers are entries' ``op_id``; a backend that counts collectives only gives
``collective_seq_id``. The newest entry whose either number is the one wanted is the op (an
older entry can share the other number, a newer one cannot).

For gloo every entry's ``state`` stays ``scheduled`` (gloo records no start/end events); the
completion shows as ``retired`` and in ``pg_status.last_completed_collective``.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Counters:
    enqueued: int
    completed: int


@dataclass(frozen=True)
class Described:
    op: str
    sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    timeout_s: float | None
    created_at: float | None


def _c10d() -> Any:
    import torch

    return torch._C._distributed_c10d


def status_raw() -> bytes:
    raw: bytes = _c10d()._dump_fr_trace_json(False, False)
    return raw


def parse_status(raw: bytes) -> dict[str, Counters]:
    """``{pg: Counters}`` from a status dump; a group that has run nothing yet is left out."""
    data = json.loads(raw)
    out = {}
    for pg, entry in (data.get("pg_status") or {}).items():
        enq = int(entry.get("last_enqueued_collective", -1))
        done = int(entry.get("last_completed_collective", -1))
        if enq >= 0:
            out[str(pg)] = Counters(enq, max(done, 0))
    return out


def describe(wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Described]:
    """Op, sizes and timeout of each wanted (pg, collective sequence number) still recorded."""
    want = set(wanted)
    if not want:
        return {}
    dump = pickle.loads(_c10d()._dump_fr_trace(True, False, False))
    found: dict[tuple[str, int], Described] = {}
    for entry in reversed(dump.get("entries") or []):  # newest first
        if entry.get("is_p2p"):
            continue
        pg = str((entry.get("process_group") or ["?"])[0])
        for seq in (int(entry.get("op_id", -1)), int(entry.get("collective_seq_id", -1))):
            if (pg, seq) in want and (pg, seq) not in found:
                found[pg, seq] = _described(entry)
        if len(found) == len(want):
            break
    return found


def _described(entry: dict[str, Any]) -> Described:
    timeout = entry.get("timeout_ms")
    created = entry.get("time_created_ns")
    return Described(
        op=str(entry.get("profiling_name", "")),
        sizes=tuple(tuple(int(d) for d in s) for s in entry.get("input_sizes") or ()),
        dtypes=tuple(str(d) for d in entry.get("input_dtypes") or ()),
        timeout_s=float(timeout) / 1000 if timeout else None,
        created_at=float(created) / 1e9 if created else None)
