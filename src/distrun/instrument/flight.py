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
import time
from collections.abc import Iterable, Sequence
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
    retired: bool = False


# torch keeps two recorders: NCCL's (CUDA builds only; ProcessGroupNCCL's collectives) and
# the generic one (gloo and other CPU backends). Both are read, NCCL's first.
RECORDERS = ("_dump_nccl_trace", "_dump_fr_trace")
# A group in both (``cpu:gloo,cuda:nccl``) keeps its name for NCCL's counters and gets this
# suffix for the generic recorder's: every group registers with NCCL's recorder when it is
# made, before any collective, so a group's keys never change while it runs.
CPU_SUFFIX = "+cpu"


def _c10d() -> Any:
    import torch

    return torch._C._distributed_c10d


def _recorders() -> list[str]:
    c10d = _c10d()
    return [name for name in RECORDERS if hasattr(c10d, name)]


def status_raw() -> tuple[bytes, ...]:
    """Each recorder's status dump, in ``RECORDERS`` order."""
    c10d = _c10d()
    return tuple(_dump(getattr(c10d, name + "_json")) for name in _recorders())


def last_counters(wait_s: float, poll_s: float = 0.005) -> dict[str, Counters]:
    """The counters a rank leaves with, its last collective completed where it is.

    gloo's worker thread completes a collective's future first and records the number after
    (``ProcessGroupGloo::runLoop``): a rank that returned from its last collective and leaves at
    once can read it as still in flight (2 ranks, torch 2.13: 1 read in 5 right after
    ``all_reduce`` returned), so the status is read again for up to ``wait_s``. With two worker
    threads an older number can also be recorded after a newer one and stay (1 in 300 pairs of
    back-to-back collectives); the entry itself is retired then, so a group still in flight
    after ``wait_s`` is looked up in the full trace once."""
    deadline = time.monotonic() + wait_s
    while True:
        counters = parse_status(status_raw())
        busy = [(pg, c.enqueued) for pg, c in counters.items() if c.enqueued > c.completed]
        if not busy:
            return counters
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    found = describe(busy)
    return {pg: Counters(c.enqueued, c.enqueued)
            if (d := found.get((pg, c.enqueued))) is not None and d.retired else c
            for pg, c in counters.items()}


def _dump(fn: Any) -> bytes:
    """One recorder's status; an empty one where it cannot answer (no group of its kind)."""
    try:
        raw: bytes = fn(False, False)
    except RuntimeError:
        return b"{}"
    return raw


def _key(pg: object, earlier: set[str]) -> str:
    """A group's key in the recorder read after those that named ``earlier``; see
    ``CPU_SUFFIX``."""
    return f"{pg}{CPU_SUFFIX}" if str(pg) in earlier else str(pg)


def _named(dump: dict[str, Any]) -> set[str]:
    return {str(pg) for pg in dump.get("pg_status") or {}}


def parse_status(raws: Sequence[bytes]) -> dict[str, Counters]:
    """``{pg: Counters}`` from the status dumps; a group that has run nothing yet is left out."""
    out = {}
    earlier: set[str] = set()
    for dump in (json.loads(raw) for raw in raws):
        for pg, entry in (dump.get("pg_status") or {}).items():
            enq = int(entry.get("last_enqueued_collective", -1))
            done = int(entry.get("last_completed_collective", -1))
            if enq >= 0:
                out[_key(pg, earlier)] = Counters(enq, max(done, 0))
        earlier |= _named(dump)
    return out


def describe(wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Described]:
    """Op, sizes and timeout of each wanted (key, collective sequence number) still recorded,
    each looked up only in the recorder its key belongs to."""
    want = set(wanted)
    found: dict[tuple[str, int], Described] = {}
    c10d = _c10d()
    earlier: set[str] = set()
    for name in _recorders():
        if len(found) == len(want):
            break
        dump = pickle.loads(getattr(c10d, name)(True, False, False))
        found.update(_search(dump, want - set(found), earlier))
        earlier |= _named(dump)
    return found


def _search(dump: dict[str, Any], want: set[tuple[str, int]], earlier: set[str]
            ) -> dict[tuple[str, int], Described]:
    found: dict[tuple[str, int], Described] = {}
    for entry in reversed(dump.get("entries") or []):  # newest first
        if len(found) == len(want):
            break
        if entry.get("is_p2p"):
            continue
        key = _key((entry.get("process_group") or ["?"])[0], earlier)
        for seq in (int(entry.get("op_id", -1)), int(entry.get("collective_seq_id", -1))):
            if (key, seq) in want and (key, seq) not in found:
                found[key, seq] = _described(entry)
    return found


def _described(entry: dict[str, Any]) -> Described:
    timeout = entry.get("timeout_ms")
    created = entry.get("time_created_ns")
    return Described(
        op=str(entry.get("profiling_name", "")),
        sizes=tuple(tuple(int(d) for d in s) for s in entry.get("input_sizes") or ()),
        dtypes=tuple(str(d) for d in entry.get("input_dtypes") or ()),
        timeout_s=float(timeout) / 1000 if timeout else None,
        created_at=float(created) / 1e9 if created else None,
        retired=bool(entry.get("retired")))
