"""The watcher's side of node heartbeats (``distrun.monitor.nodes``) on a multi-node job.

Nothing starts on a single-node job. On several nodes the store link starts once torchrun
has started this node's workers (``workers_started`` names MASTER_ADDR/MASTER_PORT); the
watcher refreshes this node's beat each tick and asks which nodes are lost.
"""

from __future__ import annotations

from distrun.monitor import nodes
from distrun.monitor.state import RunState


class NodeWatch:
    def __init__(self, state: RunState, timeout_s: float) -> None:
        self.state, self.timeout_s = state, timeout_s
        self.link: nodes.NodeLink | None = None
        self.store = ""
        self.store_here = False
        self._beat: nodes.NodeBeat | None = None

    def ranks(self) -> list[int]:
        """This node's global ranks, as torchrun assigned them."""
        return sorted(self.state.workers.ranks) if self.state.workers else []

    def update(self) -> None:
        """Refresh this node's beat; start the link once the workers run on a multi-node job."""
        st = self.state
        info = st.workers.ranks if st.workers else {}
        if not info or st.plan is None or st.plan.nnodes < 2:
            return
        first = next(iter(info.values()))
        steps = [s.step for r, s in st.ranks.items() if r in info and s.step is not None]
        node = first.node_rank if first.node_rank is not None else st.node_rank
        self._beat = nodes.NodeBeat(node, first.host or nodes.hostname(),
                                    tuple(self.ranks()), min(steps, default=None), 0.0,
                                    store_here=self.store_here)
        if self.link is None:
            self._start(st, self._beat)

    def _start(self, st: RunState, beat: nodes.NodeBeat) -> None:
        workers = st.workers
        addr = workers.master_addr if workers else None
        port = workers.master_port if workers else None
        if not addr or not port or not str(port).isdigit() or st.plan is None:
            return
        self.store = f"{addr}:{port}"
        self.store_here = nodes.serves_store(str(addr), nodes.hostname(), nodes.local_addrs())
        self._beat = nodes.NodeBeat(beat.node, beat.host, beat.ranks, beat.step, 0.0,
                                    store_here=self.store_here)
        count = st.plan.nnodes
        self.link = nodes.NodeLink(str(addr), int(port), self.beat, range(count))
        self.link.start()

    def beat(self) -> nodes.NodeBeat:
        assert self._beat is not None  # the link starts only after the first beat is made
        return self._beat

    def lost(self, now: float) -> list[nodes.LostNode]:
        if self.link is None:
            return []
        snap = self.link.snapshot()
        return nodes.lost(snap.peers, now, self.timeout_s, snap.store_ok, self.store_here)

    def holds_stall(self, now: float) -> bool:
        """A node has been silent for a few beats: a rank stall here waits for its verdict."""
        if self.link is None:
            return False
        snap = self.link.snapshot()
        return nodes.quiet(snap.peers, now, snap.store_ok, self.store_here,
                           min(nodes.QUIET_S, self.timeout_s / 2))

    def message(self, gone: list[nodes.LostNode], stopping: bool) -> str:
        return nodes.message(gone, self.ranks(), self.timeout_s, self.store, stopping)

    def stop(self) -> None:
        if self.link is not None:
            self.link.stop()
