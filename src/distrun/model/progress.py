"""A rank's collective progress, as its instrumentation writes it to
``<run>/progress/rank-<R>.json`` and the launcher's hang detector reads it.

Plain dataclasses and the standard library only: the writer runs inside every training
process (no pydantic there). A file that cannot be parsed is ``None``, never an exception.

``{"v": 1, "rank": 2, "pid": 123, "host": "n1", "backend": "gloo", "world_size": 4,
"device": "cpu", "joined_at": 1.7e9, "updated_at": 1.7e9, "exited_at": null,
"groups": {"0": {"desc": "default_pg", "ranks": [0, 1, 2, 3], "enqueued": 7, "completed": 6,
"changed_at": 1.7e9, "op": "gloo:all_reduce", "op_seq": 7, "sizes": [[1000]],
"dtypes": ["Float"], "timeout_s": 1800.0}}}``, and once the rank used point-to-point ops
``"p2p": {"sent": {"1": 3}, "received": {"1": 2}, "changed_at": 1.7e9, "pending": [{"op": "recv",
"send": false, "peer": 1, "n": 3, "pg": "0", "tag": 0, "sizes": [5], "dtype": "float32",
"since": 1.7e9}]}``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

VERSION = 1


@dataclass(frozen=True)
class GroupProgress:
    """One process group as one rank sees it: the last collective it entered (``enqueued``)
    and completed (torch's per-group collective sequence numbers, counting from 1), when that
    last changed, and the op and sizes of collective ``op_seq`` (described once it has been in
    flight a while; empty when unknown)."""

    pg: str
    desc: str = ""
    ranks: tuple[int, ...] = ()
    enqueued: int = 0
    completed: int = 0
    changed_at: float = 0.0
    op: str = ""
    op_seq: int = 0
    sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    timeout_s: float | None = None

    @property
    def in_flight(self) -> bool:
        return self.enqueued > self.completed

    def op_at(self, seq: int) -> str:
        return self.op if self.op_seq == seq else ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("pg")
        return data


@dataclass(frozen=True)
class P2POp:
    """A point-to-point op this rank entered and that has not completed: the ``n``-th send to
    (``send``) or receive from ``peer`` (a global rank; -1: from any source)."""

    op: str  # what the script called: send, recv, isend, irecv, batch_isend_irecv
    send: bool
    peer: int
    n: int
    pg: str = ""
    tag: int = 0
    sizes: tuple[int, ...] = ()
    dtype: str = ""
    since: float = 0.0

    @property
    def direction(self) -> str:
        return f"{'to' if self.send else 'from'} rank {self.peer}"


@dataclass(frozen=True)
class P2PProgress:
    """Per peer (global rank) how many sends to it and receives from it this rank entered; the
    oldest ops still pending; when any of it last changed."""

    sent: dict[int, int] = field(default_factory=dict)
    received: dict[int, int] = field(default_factory=dict)
    pending: tuple[P2POp, ...] = ()
    changed_at: float = 0.0

    def entered(self, send: bool, peer: int) -> int:
        return (self.sent if send else self.received).get(peer, 0)

    def to_json(self) -> dict[str, Any]:
        return {"sent": {str(k): v for k, v in self.sent.items()},
                "received": {str(k): v for k, v in self.received.items()},
                "changed_at": self.changed_at, "pending": [asdict(op) for op in self.pending]}


@dataclass(frozen=True)
class RankProgress:
    rank: int
    pid: int
    host: str = ""
    backend: str = ""
    world_size: int = 0
    device: str = ""
    joined_at: float | None = None
    updated_at: float = 0.0
    exited_at: float | None = None
    groups: dict[str, GroupProgress] = field(default_factory=dict)
    p2p: P2PProgress | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["groups"] = {pg: g.to_json() for pg, g in self.groups.items()}
        if self.p2p is None:
            data.pop("p2p")
        else:
            data["p2p"] = self.p2p.to_json()
        return {"v": VERSION, **data}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))


def _group(pg: str, raw: dict[str, Any]) -> GroupProgress:
    timeout = raw.get("timeout_s")
    return GroupProgress(
        pg=pg, desc=str(raw.get("desc", "")),
        ranks=tuple(int(r) for r in raw.get("ranks", ())),
        enqueued=int(raw.get("enqueued", 0)), completed=int(raw.get("completed", 0)),
        changed_at=float(raw.get("changed_at", 0.0)), op=str(raw.get("op", "")),
        op_seq=int(raw.get("op_seq", 0)),
        sizes=tuple(tuple(int(d) for d in s) for s in raw.get("sizes", ())),
        dtypes=tuple(str(d) for d in raw.get("dtypes", ())),
        timeout_s=float(timeout) if timeout is not None else None)


def _p2p(raw: Any) -> P2PProgress | None:
    if not isinstance(raw, dict):
        return None
    pending = tuple(P2POp(
        op=str(o["op"]), send=bool(o["send"]), peer=int(o["peer"]), n=int(o["n"]),
        pg=str(o.get("pg", "")), tag=int(o.get("tag", 0)),
        sizes=tuple(int(d) for d in o.get("sizes", ())), dtype=str(o.get("dtype", "")),
        since=float(o.get("since", 0.0))) for o in raw.get("pending", ()))
    return P2PProgress(
        sent={int(k): int(v) for k, v in raw.get("sent", {}).items()},
        received={int(k): int(v) for k, v in raw.get("received", {}).items()},
        pending=pending, changed_at=float(raw.get("changed_at", 0.0)))


def parse(text: str) -> RankProgress | None:
    """A progress file's text as a value; ``None`` for anything malformed."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("v") != VERSION:
            return None
        joined, exited = raw.get("joined_at"), raw.get("exited_at")
        return RankProgress(
            rank=int(raw["rank"]), pid=int(raw["pid"]), host=str(raw.get("host", "")),
            backend=str(raw.get("backend", "")), world_size=int(raw.get("world_size", 0)),
            device=str(raw.get("device", "")),
            joined_at=float(joined) if joined is not None else None,
            updated_at=float(raw.get("updated_at", 0.0)),
            exited_at=float(exited) if exited is not None else None,
            groups={str(pg): _group(str(pg), g) for pg, g in raw.get("groups", {}).items()},
            p2p=_p2p(raw.get("p2p")))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
