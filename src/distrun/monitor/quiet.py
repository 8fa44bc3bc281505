"""The quiet job: every rank alive and idle, none inside a collective or a point-to-point op,
and no progress at all (no collective, no p2p op, no ``ctx.step``) for a while.

The hang verdict of :mod:`distrun.monitor.hang` needs a waiter: a rank stuck in collective #N
that names who has not entered it. When every rank waits on something outside
torch.distributed (a file lock a killed JIT build left behind, a ``breakpoint()``, a read that
never returns), nobody waits in a collective and that verdict never comes. This one does: a
pure function of the same inputs (progress files, sampled CPU, heartbeats) and the time.
Waiting may still succeed (a lock released, a slow read returning), so it is a kind 1 (idle)
hang that warns; only ``--stall-timeout`` stops it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distrun.model.progress import RankProgress
from distrun.monitor.hang import BUSY_CPU_PERCENT, Kind, RankHealth, ranks_phrase

QUIET_AFTER_S = 30.0  # every rank idle and nothing progressed this long: name it
# A rank's own process may idle while its DataLoader workers (its children) load the first
# batch; 30 s of nothing at all, on every rank, is past that.


@dataclass(frozen=True)
class QuietVerdict:
    culprits: tuple[int, ...]
    waited_s: float
    since: str  # "collective #12 of process group 0 completed" / "the ranks joined"
    cpu: dict[int, float] = field(default_factory=dict)
    kind: Kind = Kind.IDLE
    must_stop: bool = False
    timeout_s: float | None = None  # no backend timeout runs: nothing is in flight

    @property
    def key(self) -> tuple[Any, ...]:
        return "quiet", self.culprits

    def message(self) -> str:
        use = ", ".join(f"rank {r} {c:.0f}%" for r, c in sorted(self.cpu.items()))
        return (f"no rank has made progress for {self.waited_s:.0f} s: {ranks_phrase(self.culprits)} "
                f"{'is' if len(self.culprits) == 1 else 'are'} idle outside any collective "
                f"({use} CPU) since {self.since}: hung, sleeping or blocked on something "
                "outside torch.distributed (a lock, I/O, an input); see the stacks")

    def resolved(self) -> str:
        return f"{ranks_phrase(self.culprits)} made progress again"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.label, "kind_number": int(self.kind),
                "culprits": list(self.culprits), "waiting": [],
                "collective": {"quiet": True, "since": self.since},
                "waited_s": round(self.waited_s, 3), "timeout_s": None, "must_stop": False,
                "why": {str(r): f"idle ({c:.0f}% CPU)" for r, c in sorted(self.cpu.items())},
                "message": self.message(), "waiting_graph": []}


def quiet_verdict(states: Mapping[int, RankProgress], health: Mapping[int, RankHealth],
                  beats: Mapping[int, float | None], now: float, expected: Iterable[int], *,
                  after_s: float = QUIET_AFTER_S,
                  busy_cpu_percent: float = BUSY_CPU_PERCENT) -> QuietVerdict | None:
    """The quiet job, or None while any rank is missing, gone, busy, inside a torch.distributed
    op (the hang verdict judges that) or progressed within ``after_s``."""
    ranks = tuple(sorted(expected))
    if not ranks or any(r not in states for r in ranks):
        return None
    cpu: dict[int, float] = {}
    for r in ranks:
        state, seen = states[r], health.get(r, RankHealth())
        if state.exited_at is not None or not seen.alive or _inside_op(state):
            return None
        if seen.cpu_percent is None or seen.cpu_percent >= busy_cpu_percent:
            return None
        cpu[r] = seen.cpu_percent
    waited = now - max(_last_progress(states[r], beats.get(r)) for r in ranks)
    if waited < after_s:
        return None
    return QuietVerdict(ranks, waited, _since(states.values()), cpu)


def _inside_op(state: RankProgress) -> bool:
    pending = state.p2p is not None and bool(state.p2p.pending)
    return pending or any(g.in_flight for g in state.groups.values())


def _last_progress(state: RankProgress, beat: float | None) -> float:
    times = [state.joined_at or 0.0, beat or 0.0, *(g.changed_at for g in state.groups.values())]
    if state.p2p is not None:
        times.append(state.p2p.changed_at)
    return max(times)


def _since(states: Iterable[RankProgress]) -> str:
    done = [(g.completed, pg) for s in states for pg, g in s.groups.items() if g.completed]
    if not done:
        return "the ranks joined (no collective yet)"
    seq, pg = max(done)
    return f"collective #{seq} of process group {pg} completed"
