"""Node heartbeats through the job's own store: a node that vanishes is named on the others.

Each node's watcher publishes ``distrun/nodes/<node rank>`` (JSON: node rank, host, its global
ranks, lowest step, send time, a counter) every second into the TCPStore torchrun's agent
already serves at ``MASTER_ADDR:MASTER_PORT``, and reads the other nodes' keys. A peer is
*heard* when its counter changes, timed on this node's clock (no clock skew between hosts).

The store client runs in its own daemon thread: a TCPStore ``check``/``get`` against a host
that stopped answering blocks in ``recv`` far beyond the client's timeout (seen: 15 min with
torch 2.13 against a SIGSTOPped server), so the watcher only ever reads this thread's last
snapshot and never waits on the network. A node that cannot reach the store for longer than
the stall timeout reports the node that hosts it as lost.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

PREFIX = "distrun/nodes/"
QUIET_S = 3.0  # three missed beats: a rank stall waits for the node verdict instead


@dataclass(frozen=True)
class NodeBeat:
    node: int
    host: str
    ranks: tuple[int, ...]
    step: int | None
    sent: float
    seq: int = 0
    store_here: bool = False

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "ranks": list(self.ranks)})

    @classmethod
    def from_json(cls, raw: bytes | str) -> NodeBeat | None:
        try:
            data = json.loads(raw)
            return cls(int(data["node"]), str(data["host"]), tuple(int(r) for r in data["ranks"]),
                       None if data.get("step") is None else int(data["step"]),
                       float(data["sent"]), int(data.get("seq", 0)),
                       bool(data.get("store_here", False)))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass
class Peer:
    beat: NodeBeat
    heard: float  # this node's clock when the peer's counter last changed


@dataclass(frozen=True)
class LostNode:
    node: int
    host: str
    ranks: tuple[int, ...]
    last_heard_s: float
    step: int | None
    reason: str  # "silent": its heartbeat stopped; "store": this node lost the store it serves

    def where(self) -> str:
        return f"node {self.node} ({self.host}, {rank_span(self.ranks)})"


def rank_span(ranks: Iterable[int]) -> str:
    """``ranks 2-3``, ``ranks 0, 4-7``, ``rank 5``."""
    nums = sorted(set(ranks))
    if not nums:
        return "no ranks"
    runs: list[list[int]] = []
    for num in nums:
        if runs and num == runs[-1][-1] + 1:
            runs[-1].append(num)
        else:
            runs.append([num])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return ("rank " if len(nums) == 1 else "ranks ") + text


def lost(peers: Mapping[int, Peer], now: float, timeout_s: float, store_ok: float | None,
         store_here: bool) -> list[LostNode]:
    """The nodes to report: peers silent past the timeout, or the store's node when it is gone.

    ``store_ok`` is when this node last completed a round with the store (None: never).
    """
    if not store_here and store_ok is not None and now - store_ok > timeout_s:
        return [_store_node(peers, now, store_ok)]
    return [_lost(p, now, "silent") for _, p in sorted(peers.items())
            if now - p.heard > timeout_s]


def _lost(peer: Peer, now: float, reason: str) -> LostNode:
    b = peer.beat
    return LostNode(b.node, b.host, b.ranks, now - peer.heard, b.step, reason)


def _store_node(peers: Mapping[int, Peer], now: float, store_ok: float) -> LostNode:
    hosts = [p for p in peers.values() if p.beat.store_here] or [
        p for n, p in peers.items() if n == 0]
    if hosts:
        return _lost(hosts[0], now, "store")
    return LostNode(0, "?", (), now - store_ok, None, "store")


def quiet(peers: Mapping[int, Peer], now: float, store_ok: float | None, store_here: bool,
          quiet_s: float) -> bool:
    """Has some node been silent for a few beats? Then a rank stall here is its symptom."""
    if not store_here and store_ok is not None and now - store_ok > quiet_s:
        return True
    return any(now - p.heard > quiet_s for p in peers.values())


def message(gone: Sequence[LostNode], here: Sequence[int], timeout_s: float, store: str,
            stopping: bool) -> str:
    """One paragraph naming each lost node, why it counts as lost, and what happens now."""
    parts = []
    for n in gone:
        step = "" if n.step is None else f", last step {n.step}"
        text = (f"{n.where()} last heard {n.last_heard_s:.1f} s ago (--stall-timeout "
                f"{timeout_s:g} s{step})")
        if n.reason == "store":
            text += (f"; the job's store at {store}, which that node serves, does not answer "
                     "from this node: that node died, or the network between the nodes is cut")
        else:
            text += "; the node died, hangs, or the network to it is cut"
        parts.append(text)
    text = "; ".join(parts)
    if here:
        text += f"; {rank_span(here)} on this node cannot go on without it"
    return text + ("; stopping the job (pass --stall-action warn to keep waiting)" if stopping
                   else "; --stall-action warn: the job keeps running")


def serves_store(addr: str, hostname: str, local_addrs: Iterable[str]) -> bool:
    """Is ``addr`` (MASTER_ADDR) this node? Compared without any name look-up."""
    return addr in {hostname, "localhost", "127.0.0.1", "::1", *local_addrs}


def local_addrs() -> list[str]:
    import psutil

    return [a.address for addrs in psutil.net_if_addrs().values() for a in addrs]


@dataclass
class _Snapshot:
    peers: dict[int, Peer] = field(default_factory=dict)
    store_ok: float | None = None
    error: str = ""


class NodeLink(threading.Thread):
    """Publishes this node's beat and reads the others', once a second, in its own thread."""

    def __init__(self, addr: str, port: int, me: Callable[[], NodeBeat], nodes: Sequence[int], *,
                 interval_s: float = 1.0, op_timeout_s: float = 1.0) -> None:
        super().__init__(name="distrun-nodes", daemon=True)
        self.addr, self.port, self.me = addr, port, me
        self.interval_s, self.op_timeout_s = interval_s, op_timeout_s
        self.keys = {n: f"{PREFIX}{n}" for n in nodes}
        self._lock = threading.Lock()
        self._snap = _Snapshot()
        self._halt = threading.Event()
        self._seq = 0
        self._store: Any = None

    def snapshot(self) -> _Snapshot:
        with self._lock:
            return _Snapshot(dict(self._snap.peers), self._snap.store_ok, self._snap.error)

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self._round()
            except Exception as exc:  # unreachable store, reset connection: reconnect next time
                self._store = None
                with self._lock:
                    self._snap.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            self._halt.wait(self.interval_s)

    def _round(self) -> None:
        if self._store is None:
            import torch.distributed as dist

            self._store = dist.TCPStore(  # type: ignore[attr-defined]
                self.addr, self.port, is_master=False,
                timeout=timedelta(seconds=self.op_timeout_s), wait_for_workers=False)
        self._seq += 1
        beat = self.me()
        mine = NodeBeat(beat.node, beat.host, beat.ranks, beat.step, time.time(), self._seq,
                        beat.store_here)
        self._store.set(self.keys[beat.node], mine.to_json())
        others = [n for n in self.keys if n != beat.node]
        present = [n for n in others if self._store.check([self.keys[n]])]
        raws = self._store.multi_get([self.keys[n] for n in present]) if present else []
        self._merge(dict(zip(present, raws, strict=True)), time.time())

    def _merge(self, raws: Mapping[int, bytes], now: float) -> None:
        with self._lock:
            for node, raw in raws.items():
                beat = NodeBeat.from_json(raw)
                if beat is None:
                    continue
                old = self._snap.peers.get(node)
                if old is None or old.beat.seq != beat.seq:
                    self._snap.peers[node] = Peer(beat, now)
                else:
                    old.beat = beat
            self._snap.store_ok, self._snap.error = now, ""


def hostname() -> str:
    return socket.gethostname()
