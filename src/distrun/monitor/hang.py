"""The hang verdict: which rank(s) the others wait for, in which collective, and why
(docs/instrument.md). A pure function of the ranks' collective progress (written by
:mod:`distrun.instrument`), what the launcher sampled of their processes, and the time.

Kinds:

1. ``idle``: the culprit has not entered collective #N that the others wait in, and uses no
   CPU: hung or sleeping outside any collective (deadlock, blocked I/O, a ``sleep``);
2. ``busy``: the same, but the culprit computes (rank-0-only evaluation, checkpointing,
   preprocessing): the classic "NCCL timeout" whose cause is on another rank;
3. ``mismatch``: every rank entered #N, but not the same op or shapes: it cannot complete;
4. ``gone``: a rank the others wait for exited (or its node is gone).

Point-to-point ops are judged per waiter: a rank stuck for ``hang_after_s`` in its ``n``-th
``recv`` from (``send`` to) rank P, where P has entered fewer than ``n`` sends to (receives
from) it, names P, idle or busy (or gone) as above.

Waiting can succeed for kinds 1 and 2, so they are named and warned about; kinds 3 and 4 can
never finish (:attr:`HangVerdict.must_stop`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from distrun.model.progress import GroupProgress, P2POp, RankProgress

# The others have waited this long in collective #N: name the culprit. Not less, even for a
# shorter --stall-timeout: while a rank progresses, its progress file is rewritten at most
# every 5 s (distrun.instrument.agent.STEADY_WRITE_S) and read once a second, so a healthy
# rank's file can look stuck for about 6 s (timeout_note says so at launch).
HANG_AFTER_S = 10.0
BUSY_CPU_PERCENT = 10.0  # a sleeping or blocked process shows ~0%; 2 busy ranks on a shared
# 2-core host showed 26%


class Kind(IntEnum):
    IDLE = 1
    BUSY = 2
    MISMATCH = 3
    GONE = 4

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class RankHealth:
    """What the launcher sampled of a rank's process."""

    alive: bool = True
    cpu_percent: float | None = None


@dataclass(frozen=True)
class WaitEdge:
    """``waiter`` waits in collective ``seq`` of group ``pg`` for ``culprit``."""

    waiter: int
    culprit: int
    pg: str
    seq: int
    op: str


@dataclass(frozen=True)
class HangVerdict:
    kind: Kind
    culprits: tuple[int, ...]
    waiting: tuple[int, ...]
    pg: str
    seq: int
    op: str
    sizes: tuple[tuple[int, ...], ...]
    waited_s: float
    edges: tuple[WaitEdge, ...]
    why: dict[int, str] = field(default_factory=dict)  # per culprit: what it does instead
    timeout_s: float | None = None
    p2p: P2POp | None = None  # a point-to-point op, not a collective

    @property
    def must_stop(self) -> bool:
        return self.kind in (Kind.MISMATCH, Kind.GONE)

    @property
    def key(self) -> tuple[Kind, tuple[int, ...], str, int, bool]:
        return self.kind, self.culprits, self.pg, self.seq, self.p2p is not None

    def collective(self) -> str:
        sizes = f" {list(map(list, self.sizes))}" if self.sizes else ""
        if self.p2p is not None:
            sizes = f" {list(self.p2p.sizes)}"
            return (f"p2p #{self.seq} ({self.op} {self.p2p.direction}{sizes} "
                    f"{self.p2p.dtype}, process group {self.pg})")
        return f"collective #{self.seq} ({self.op or 'op unknown'}{sizes}, process group {self.pg})"

    def resolved(self) -> str:
        return f"{ranks_phrase(self.culprits)} caught up and {self.collective()} went on"

    def message(self) -> str:
        if self.p2p is not None:
            return self._p2p_message(self.p2p)

        who = ranks_phrase(self.culprits)
        waiting = f"{ranks_phrase(self.waiting)} {'waits' if len(self.waiting) == 1 else 'wait'}"
        if self.kind is Kind.MISMATCH:
            ops = "; ".join(f"rank {r}: {w}" for r, w in sorted(self.why.items()))
            return (f"collective mismatch at {self.collective()}: {ops}: {who} entered a "
                    "different op or shape than the others; it can never complete")
        parts = [f"{who} {'has' if len(self.culprits) == 1 else 'have'} not entered "
                 f"{self.collective()} that {waiting} in for {self.waited_s:.0f} s"]
        parts += [f"rank {r} {w}" for r, w in sorted(self.why.items())]
        return "; ".join(parts)

    def _p2p_message(self, op: P2POp) -> str:
        sizes = f" {list(self.sizes[0])}" if self.sizes else ""
        match = "recv" if op.send else "send"
        return (f"{ranks_phrase(self.waiting)} waits in {self.op} {op.direction} (p2p #{self.seq},"
                f"{sizes} {op.dtype}, process group {self.pg}, tag {op.tag}) for "
                f"{self.waited_s:.0f} s; {ranks_phrase(self.culprits)} has not entered the matching "
                f"{match}: " + "; ".join(f"rank {r} {w}" for r, w in sorted(self.why.items())))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.label, "kind_number": int(self.kind),
                "culprits": list(self.culprits), "waiting": list(self.waiting),
                "collective": {"pg": self.pg, "seq": self.seq, "op": self.op,
                               "sizes": [list(s) for s in self.sizes],
                               **({"p2p": True, "send": self.p2p.send, "peer": self.p2p.peer}
                                  if self.p2p is not None else {})},
                "waited_s": round(self.waited_s, 3), "timeout_s": self.timeout_s,
                "must_stop": self.must_stop, "why": {str(r): w for r, w in self.why.items()},
                "message": self.message(),
                "waiting_graph": [{"waiter": e.waiter, "culprit": e.culprit, "pg": e.pg,
                                   "seq": e.seq, "op": e.op} for e in self.edges]}


def timeout_note(stall_timeout_s: float | None) -> str:
    """The launch's line when ``--stall-timeout`` is shorter than ``HANG_AFTER_S`` ("" else):
    a hang inside torch.distributed is stopped only after ``HANG_AFTER_S``."""
    if stall_timeout_s is None or stall_timeout_s >= HANG_AFTER_S:
        return ""
    return (f"distrun: note: --stall-timeout {stall_timeout_s:g}: a hang inside "
            f"torch.distributed (a collective, a send or recv) is named, and the job stopped, "
            f"after {HANG_AFTER_S:g} s at the earliest (the ranks' progress reaches distrun up "
            f"to 6 s late: a shorter wait could stop a healthy job); a ctx.step heartbeat stall, "
            f"or every rank idle outside torch.distributed, stops it after "
            f"{stall_timeout_s:g} s")


def ranks_phrase(ranks: Sequence[int]) -> str:
    """``rank 2`` / ``ranks 0, 1``: how every hang message names ranks."""
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def hang_verdict(states: Mapping[int, RankProgress], health: Mapping[int, RankHealth],
                 now: float, expected_ranks: Iterable[int], *,
                 hang_after_s: float = HANG_AFTER_S,
                 busy_cpu_percent: float = BUSY_CPU_PERCENT) -> HangVerdict | None:
    """The worst hang over every process group; ``None`` while collectives progress."""
    seen = _Seen(states, health, now, tuple(sorted(expected_ranks)), hang_after_s,
                 busy_cpu_percent)
    found = []
    for pg in sorted({pg for s in states.values() for pg in s.groups}):
        verdict = _group_verdict(pg, seen)
        if verdict is not None:
            found.append(verdict)
    found += [v for r in sorted(states) if (v := _p2p_verdict(r, seen)) is not None]
    return max(found, key=lambda v: (v.must_stop, v.waited_s), default=None)


@dataclass(frozen=True)
class _Seen:
    states: Mapping[int, RankProgress]
    health: Mapping[int, RankHealth]
    now: float
    expected: tuple[int, ...]
    hang_after_s: float
    busy: float


@dataclass(frozen=True)
class _At:
    pg: str
    seq: int
    waited: float


def _members(pg: str, states: Mapping[int, RankProgress], expected: tuple[int, ...]) -> list[int]:
    for state in states.values():
        group = state.groups.get(pg)
        if group is not None and group.ranks:
            return sorted(group.ranks)
    return list(expected) if pg == "0" else sorted(r for r, s in states.items() if pg in s.groups)


def _group_verdict(pg: str, seen: _Seen) -> HangVerdict | None:
    states, health = seen.states, seen.health
    members = _members(pg, states, seen.expected)
    groups = {r: states[r].groups.get(pg) if r in states else None for r in members}
    seq = max((g.enqueued for g in groups.values() if g is not None), default=0)
    laggards = [r for r, g in groups.items()  # ranks on other nodes are not seen here
                if (g is None and r in seen.expected) or (g is not None and g.enqueued < seq)]
    gone = [r for r in laggards if not _alive(r, states, health)]
    waiters = {r: g for r, g in groups.items() if g is not None and g.enqueued == seq
               and (g.in_flight or _failed_on(r, gone, states))}
    if not waiters:
        return None
    at = _At(pg, seq, seen.now - max(g.changed_at for g in waiters.values()))
    if gone:
        return _verdict(Kind.GONE, gone, waiters, at,
                        {r: _gone_why(r, groups[r], states) for r in gone})
    if at.waited < seen.hang_after_s:
        return None
    if laggards:
        cpu = {r: health.get(r, RankHealth()).cpu_percent for r in laggards}
        kind = Kind.BUSY if all((c or 0.0) >= seen.busy for c in cpu.values()) else Kind.IDLE
        return _verdict(kind, laggards, waiters, at,
                        {r: _lag_why(kind, groups[r], cpu[r]) for r in laggards})
    return _mismatch(waiters, at)


def _p2p_verdict(waiter: int, seen: _Seen) -> HangVerdict | None:
    """The oldest p2p op ``waiter`` is stuck in whose peer has not entered the matching op."""
    state = seen.states[waiter]
    p2p = state.p2p
    if p2p is None or not p2p.pending or not _alive(waiter, seen.states, seen.health):
        return None
    busy_since = max([p2p.changed_at, *(g.changed_at for g in state.groups.values())])
    for op in p2p.pending:
        peer = seen.states.get(op.peer)
        if peer is None or op.peer == waiter:
            continue  # any source, or a peer on another node: not judged from here
        theirs = peer.p2p.entered(not op.send, waiter) if peer.p2p is not None else 0
        if theirs >= op.n:
            continue  # the peer entered the matching op
        waited = seen.now - max(op.since, busy_since)
        what = f"{theirs} {'recv' if op.send else 'send'}(s) {'from' if op.send else 'to'} " \
               f"rank {waiter}"
        if not _alive(op.peer, seen.states, seen.health):
            kind, why = Kind.GONE, (f"exited after {what} (its process ended): waiting for it "
                                    "can never succeed")
        elif waited < seen.hang_after_s:
            return None
        else:
            cpu = seen.health.get(op.peer, RankHealth()).cpu_percent
            kind = Kind.BUSY if (cpu or 0.0) >= seen.busy else Kind.IDLE
            why = _p2p_why(kind, cpu, what)
        return HangVerdict(kind, (op.peer,), (waiter,), op.pg, op.n, op.op, (op.sizes,),
                           waited, (WaitEdge(waiter, op.peer, op.pg, op.n, op.op),),
                           {op.peer: why}, None, op)
    return None


def _p2p_why(kind: Kind, cpu: float | None, what: str) -> str:
    use = f"{cpu:.0f}% CPU" if cpu is not None else "CPU use unknown"
    if kind is Kind.BUSY:
        return f"is busy elsewhere ({use}; it entered {what}): work only it does while " \
               "the other waits"
    return f"is idle ({use}; it entered {what}): hung, sleeping or blocked"


def _failed_on(rank: int, gone: list[int], states: Mapping[int, RankProgress]) -> bool:
    """A collective cannot complete without every member: one "completed" (gloo counts a
    failed one so) at a number that an exited member never reached failed on it."""
    exited = [r for r in gone if r in states and states[r].exited_at is not None]
    return bool(exited) and rank in states and states[rank].exited_at is not None


def _alive(rank: int, states: Mapping[int, RankProgress],
           health: Mapping[int, RankHealth]) -> bool:
    state = states.get(rank)
    if state is not None and state.exited_at is not None:
        return False
    return health.get(rank, RankHealth()).alive


def _gone_why(rank: int, group: GroupProgress | None, states: Mapping[int, RankProgress]) -> str:
    last = f" after collective #{group.enqueued}" if group is not None else ""
    how = "exited" if rank in states and states[rank].exited_at is not None else "is gone"
    return f"{how}{last} (its process ended): waiting for it can never succeed"


def _lag_why(kind: Kind, group: GroupProgress | None, cpu: float | None) -> str:
    last = (f"last entered collective #{group.enqueued}" if group is not None
            else "has not joined this process group")
    use = f"{cpu:.0f}% CPU" if cpu is not None else "CPU use unknown"
    if kind is Kind.BUSY:
        return (f"is busy outside the collective ({use}; {last}): work only it does "
                "(evaluation, checkpointing, preprocessing) while the others wait")
    return f"is idle outside any collective ({use}; {last}): hung, sleeping or blocked"


def _verdict(kind: Kind, culprits: list[int], waiters: Mapping[int, GroupProgress], at: _At,
             why: dict[int, str]) -> HangVerdict:
    pg, seq = at.pg, at.seq
    described = [g for g in waiters.values() if g.op_at(seq)]
    first = described[0] if described else None
    edges = tuple(WaitEdge(w, c, pg, seq, g.op_at(seq))
                  for w, g in sorted(waiters.items()) for c in culprits)
    timeouts = [g.timeout_s for g in waiters.values() if g.timeout_s]
    return HangVerdict(kind, tuple(culprits), tuple(sorted(waiters)), pg, seq,
                       first.op if first else "", first.sizes if first else (), at.waited,
                       edges, why, min(timeouts) if timeouts else None)


def _mismatch(waiters: Mapping[int, GroupProgress], at: _At) -> HangVerdict | None:
    seq = at.seq
    issued = {r: (g.op_at(seq), g.sizes) for r, g in waiters.items() if g.op_at(seq)}
    if len(set(issued.values())) < 2:
        return None
    counts = Counter(issued.values())
    lowest = issued[min(issued)]
    common = max(counts, key=lambda k: (counts[k], k == lowest))
    odd = sorted(r for r, k in issued.items() if k != common)
    rest = {r: g for r, g in waiters.items() if r not in odd}
    why = {r: f"{op} {list(map(list, sizes))}" for r, (op, sizes) in sorted(issued.items())}
    return _verdict(Kind.MISMATCH, odd, rest, at, why)


def cause_line(hang: Mapping[str, Any]) -> tuple[str, list[int]]:
    """``hang.json`` as one line of cause and the culprit ranks (for ``distrun diagnose``)."""
    culprits = [int(r) for r in hang.get("culprits", [])]
    kind = str(hang.get("kind", "hang"))
    coll = hang.get("collective") or {}
    where = f"collective #{coll.get('seq', '?')} ({coll.get('op') or 'op unknown'})"
    if coll.get("p2p"):
        where = (f"p2p #{coll.get('seq', '?')} ({coll.get('op')} "
                 f"{'to' if coll.get('send') else 'from'} rank {coll.get('peer', '?')})")
    who = ", ".join(map(str, culprits)) or "?"
    if coll.get("quiet"):
        return (f"rank {who} sat idle outside any collective, with no progress since "
                f"{coll.get('since', '?')}"), culprits
    text = {"idle": f"rank {who} hung outside {where} while the others waited in it",
            "busy": f"rank {who} was busy outside {where} while the others waited in it",
            "mismatch": f"collective mismatch at {where}: rank {who} issued a different op "
                        "or shape",
            "gone": f"rank {who} was gone while the others waited in {where}"}.get(
                kind, str(hang.get("message", "a hang")))
    return text, culprits
