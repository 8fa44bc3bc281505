"""Node heartbeats -> lost-node verdicts (distrun.monitor.nodes), pure."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.model.plan import Request
from distrun.model.record import BadLine, parse_event
from distrun.monitor.nodes import (
    LostNode,
    NodeBeat,
    NodeLink,
    Peer,
    lost,
    message,
    quiet,
    rank_span,
)
from distrun.monitor.nodewatch import NodeWatch
from distrun.monitor.state import RunState
from distrun.plan.planner import build

NOW = 1000.0


def peer(node: int, heard_ago: float, *, store_here: bool = False, step: int | None = 7
         ) -> Peer:
    ranks = (2 * node, 2 * node + 1)
    return Peer(NodeBeat(node, f"n{node}", ranks, step, NOW - heard_ago - 0.5, 3, store_here),
                NOW - heard_ago)


@pytest.mark.parametrize(("ranks", "text"), [
    ([2, 3], "ranks 2-3"), ([5], "rank 5"), ([0, 4, 5, 6, 7], "ranks 0, 4-7"),
    ([3, 1, 2, 9], "ranks 1-3, 9"), ([], "no ranks")])
def test_rank_span(ranks: list[int], text: str) -> None:
    assert rank_span(ranks) == text


def test_peers_heard_within_the_timeout_are_not_lost() -> None:
    peers = {1: peer(1, 4.9), 2: peer(2, 0.2)}
    assert lost(peers, NOW, 5.0, store_ok=NOW - 0.5, store_here=True) == []


def test_a_silent_peer_is_lost_with_its_age_host_and_ranks() -> None:
    peers = {1: peer(1, 6.1), 2: peer(2, 0.2)}
    (gone,) = lost(peers, NOW, 5.0, store_ok=NOW - 0.5, store_here=False)
    assert gone == LostNode(1, "n1", (2, 3), pytest.approx(6.1), 7, "silent")
    assert gone.where() == "node 1 (n1, ranks 2-3)"


def test_an_unreachable_store_loses_the_node_that_serves_it() -> None:
    peers = {0: peer(0, 6.0, store_here=True), 2: peer(2, 6.0)}
    (gone,) = lost(peers, NOW, 5.0, store_ok=NOW - 6.0, store_here=False)
    assert (gone.node, gone.reason) == (0, "store")  # not node 2: it cannot be told from here


def test_an_unreachable_store_without_a_known_server_is_node_0() -> None:
    (gone,) = lost({0: peer(0, 7.0), 3: peer(3, 7.0)}, NOW, 5.0, store_ok=NOW - 7.0,
                   store_here=False)
    assert (gone.node, gone.host, gone.reason) == (0, "n0", "store")
    (alone,) = lost({}, NOW, 5.0, store_ok=NOW - 7.0, store_here=False)
    assert (alone.node, alone.host, alone.ranks) == (0, "?", ())


def test_the_store_is_never_judged_lost_on_the_node_serving_it_or_before_it_answered() -> None:
    assert lost({}, NOW, 5.0, store_ok=NOW - 60, store_here=True) == []
    assert lost({}, NOW, 5.0, store_ok=None, store_here=False) == []


def test_quiet_holds_a_rank_stall_after_a_few_missed_beats() -> None:
    assert not quiet({1: peer(1, 1.5)}, NOW, NOW - 0.5, False, 3.0)
    assert quiet({1: peer(1, 3.5)}, NOW, NOW - 0.5, False, 3.0)
    assert quiet({}, NOW, NOW - 3.5, False, 3.0)  # the store went quiet
    assert not quiet({}, NOW, NOW - 3.5, True, 3.0)


def test_message_names_the_node_and_the_action() -> None:
    gone = [LostNode(1, "n1", (2, 3), 6.14, 42, "silent")]
    text = message(gone, [0, 1], 5.0, "10.0.0.1:29500", stopping=True)
    assert text == ("node 1 (n1, ranks 2-3) last heard 6.1 s ago (--stall-timeout 5 s, last "
                    "step 42); the node died, hangs, or the network to it is cut; ranks 0-1 on "
                    "this node cannot go on without it; stopping the job (pass --stall-action "
                    "warn to keep waiting)")
    store = [LostNode(0, "n0", (0, 1), 5.5, None, "store")]
    text = message(store, [2, 3], 5.0, "10.0.0.1:29500", stopping=False)
    assert "the job's store at 10.0.0.1:29500, which that node serves, does not answer" in text
    assert text.endswith("--stall-action warn: the job keeps running")


def test_beat_round_trips_and_rejects_garbage() -> None:
    beat = NodeBeat(1, "n1", (2, 3), None, 12.5, 9, True)
    assert NodeBeat.from_json(beat.to_json()) == beat
    assert NodeBeat.from_json(b"not json") is None
    assert NodeBeat.from_json(b'{"node": 1}') is None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


@pytest.mark.slow
def test_links_see_each_other_through_a_real_store_and_notice_silence() -> None:
    import torch.distributed as dist

    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, is_master=True,  # type: ignore[attr-defined]
                           wait_for_workers=False, timeout=timedelta(seconds=5))
    beats = [NodeBeat(n, f"n{n}", (2 * n, 2 * n + 1), 5, 0.0, store_here=n == 0)
             for n in range(2)]
    links = [NodeLink("127.0.0.1", port, lambda n=n: beats[n], range(2), interval_s=0.1)
             for n in range(2)]
    for link in links:
        link.start()
    try:
        wait_for(lambda: 1 in links[0].snapshot().peers and 0 in links[1].snapshot().peers)
        assert links[0].snapshot().peers[1].beat.ranks == (2, 3)
        links[1].stop()
        links[1].join(timeout=5)
        time.sleep(0.6)
        snap = links[0].snapshot()
        (gone,) = lost(snap.peers, time.time(), 0.5, snap.store_ok, store_here=True)
        assert (gone.node, gone.host, gone.reason) == (1, "n1", "silent")
    finally:
        for link in links:
            link.stop()
        del server


def test_single_node_jobs_start_no_link(tmp_path: Path) -> None:
    plan = build(Request(script="train.py", nproc_per_node="2"), parse_declared("1x2xH100-80GB"))
    state = RunState(tmp_path, plan)
    event = parse_event(json.dumps({
        "event": "workers_started", "master_addr": "127.0.0.1", "master_port": "1",
        "ranks": {"0": {"node_rank": 0, "host": "h"}, "1": {"node_rank": 0}}}))
    assert not isinstance(event, BadLine)
    state.apply(event)
    assert plan.nnodes == 1 and state.workers is not None and sorted(state.workers.ranks) == [0, 1]
    watch = NodeWatch(state, 5.0)
    watch.update()
    assert watch.link is None and watch.lost(NOW) == [] and not watch.holds_stall(NOW)
