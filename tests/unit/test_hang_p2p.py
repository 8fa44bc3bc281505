"""Point-to-point hangs over synthetic per-rank progress (the verdict), and the agent's p2p
recorder over stand-in ``Work`` objects (completion polled, never waited on)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from distrun.instrument import agent, flight
from distrun.instrument.p2p import Recorder, _wrapper
from distrun.model.progress import GroupProgress, P2POp, P2PProgress, RankProgress, parse
from distrun.monitor.hang import Kind, RankHealth, cause_line, hang_verdict

NOW = 1000.0
PAIR = (0, 1)


def state(r: int, *, sent: int = 0, received: int = 0, pending: tuple[P2POp, ...] = (),
          active: float = NOW - 30, exited: float | None = None) -> RankProgress:
    peer = 1 - r
    group = GroupProgress(pg="0", desc="default_pg", ranks=PAIR, enqueued=1, completed=1,
                          changed_at=active)
    p2p = P2PProgress(sent={peer: sent}, received={peer: received}, pending=pending,
                      changed_at=active)
    return RankProgress(rank=r, pid=100 + r, joined_at=NOW - 60, exited_at=exited,
                        groups={"0": group}, p2p=p2p)


def recv(n: int, since: float = NOW - 12) -> P2POp:
    return P2POp(op="recv", send=False, peer=1, n=n, pg="0", sizes=(5,), dtype="float32",
                 since=since)


def cpu(c1: float, alive: bool = True) -> dict[int, RankHealth]:
    return {0: RankHealth(True, 0.0), 1: RankHealth(alive, c1)}


def test_rank_0_waits_in_recv_rank_1_never_sent_is_named_idle() -> None:
    states = {0: state(0, sent=1, received=2, pending=(recv(2),)), 1: state(1, sent=1)}
    v = hang_verdict(states, cpu(0.0), NOW, PAIR)
    assert v is not None and v.kind is Kind.IDLE and v.culprits == (1,) and v.waiting == (0,)
    assert not v.must_stop
    assert v.message() == (
        "rank 0 waits in recv from rank 1 (p2p #2, [5] float32, process group 0, tag 0) for "
        "12 s; rank 1 has not entered the matching send: rank 1 is idle (0% CPU; it entered 1 "
        "send(s) to rank 0): hung, sleeping or blocked")
    assert cause_line(v.to_json()) == (
        "rank 1 hung outside p2p #2 (recv from rank 1) while the others waited in it", [1])
    assert v.to_json()["waiting_graph"] == [
        {"waiter": 0, "culprit": 1, "pg": "0", "seq": 2, "op": "recv"}]


def test_busy_and_gone_peers() -> None:
    states = {0: state(0, received=1, pending=(recv(1),)), 1: state(1)}
    busy = hang_verdict(states, cpu(97.0), NOW, PAIR)
    assert busy is not None and busy.kind is Kind.BUSY
    assert "rank 1 is busy elsewhere (97% CPU; it entered 0 send(s) to rank 0)" in busy.message()
    gone = hang_verdict(states | {1: state(1, exited=NOW - 1)}, cpu(0.0, alive=False),
                        NOW - 8, PAIR)  # gone: named before the 10 s threshold
    assert gone is not None and gone.kind is Kind.GONE and gone.must_stop


def test_no_verdict_when_matched_early_or_still_progressing() -> None:
    matched = {0: state(0, received=2, pending=(recv(2),)), 1: state(1, sent=2)}
    assert hang_verdict(matched, cpu(0.0), NOW, PAIR) is None  # rank 1 sent: not its fault
    early = {0: state(0, received=2, pending=(recv(2, since=NOW - 4),)), 1: state(1, sent=1)}
    assert hang_verdict(early, cpu(0.0), NOW, PAIR) is None
    # an isend left pending while the rank goes on with collectives is no hang
    busy = {0: state(0, received=2, pending=(recv(2),), active=NOW - 1), 1: state(1, sent=1)}
    assert hang_verdict(busy, cpu(0.0), NOW, PAIR) is None


def test_p2p_progress_round_trips_through_the_file() -> None:
    s = state(0, sent=3, received=2, pending=(recv(3),))
    assert parse(s.dumps()) == s
    plain = RankProgress(rank=0, pid=1)
    assert "p2p" not in plain.to_json() and parse(plain.dumps()) == plain


@dataclass
class FakeWork:
    done: bool = False

    def is_completed(self) -> bool:
        return self.done


def test_recorder_counts_per_peer_and_lets_completed_work_go() -> None:
    rec = Recorder()
    rec.poll(NOW)
    assert rec.snapshot() is None
    works = [FakeWork(), FakeWork(), FakeWork()]
    send = _wrapper(lambda t, *a, **k: works.pop(0), True, rec,
                    lambda args, kwargs: (args[0] if args else kwargs["group_dst"], "0", 0))
    recv = _wrapper(lambda t, *a, **k: works.pop(0), False, rec,
                    lambda args, kwargs: (args[0], "0", kwargs.get("tag", 0)))
    first = send(torch.ones(2, 3), 1)
    second = recv(torch.ones(4, dtype=torch.int64), 1, tag=7)
    third = send(torch.ones(2), group_dst=1)  # another argument form, the same peer
    rec.poll(NOW)
    snap = rec.snapshot()
    assert snap is not None and snap.sent == {1: 2} and snap.received == {1: 1}
    assert [(p.op, p.n, p.sizes, p.dtype, p.tag, p.peer) for p in snap.pending] == [
        ("irecv", 1, (4,), "int64", 7, 1), ("isend", 2, (2,), "float32", 0, 1)]  # oldest first
    version = rec.version
    rec.poll(NOW + 1)
    assert rec.version == version  # nothing completed: nothing changed
    first.done = third.done = True
    rec.poll(NOW + 2)
    snap = rec.snapshot()
    assert snap is not None and [p.op for p in snap.pending] == ["irecv"]
    assert rec.version > version and snap.changed_at == NOW + 2
    second.done = True
    rec.poll(NOW + 3)
    assert rec.snapshot() == P2PProgress({1: 2}, {1: 1}, (), NOW + 3)


def test_gloo_numbers_lose_the_p2p_ops_and_the_op_is_looked_up_by_the_raw_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gloo's pg_status counts p2p ops too (checked with torch 2.13): a pipeline stage that
    sent 3 times before its 2nd all_reduce reports 5; the verdict must see collective #2."""
    monkeypatch.setattr(agent, "_static_identity", lambda: ("gloo", 3))
    monkeypatch.setattr(agent, "_groups", lambda: {"0": ((0, 1, 2), "default_pg")})
    rec = Recorder()
    rec.groups["0"] = 3
    tracker = agent.Tracker(agent.Writer(str(tmp_path), 0), 0, rec)
    tracker._merge({"0": flight.Counters(enqueued=5, completed=4)}, NOW - 3)
    group = tracker._groups["0"]
    assert (group.enqueued, group.completed, group.in_flight) == (2, 1, True)
    assert tracker._undescribed(NOW, exiting=False) == [("0", 5)]
    monkeypatch.setattr(agent.flight, "describe", lambda want: {
        ("0", 5): flight.Described("gloo:all_reduce", ((4,),), ("Float",), 1800.0, None)})
    tracker._describe([("0", 5)], NOW)
    assert tracker._groups["0"].op_at(2) == "gloo:all_reduce"


def _status(enqueued: int, completed: int) -> tuple[bytes, ...]:
    return (json.dumps({"pg_status": {"0": {"last_enqueued_collective": str(enqueued),
                                            "last_completed_collective": str(completed)}}}
                       ).encode(),)


def test_the_exit_write_waits_for_a_returned_collective_and_is_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gloo marks a collective completed just after wait() returns: a rank leaving at once read
    its last all_reduce as in flight, and a late tick could overwrite the exit's write."""
    monkeypatch.setattr(agent, "_static_identity", lambda: ("gloo", 2))
    monkeypatch.setattr(agent, "_groups", lambda: {"0": ((0, 1), "default_pg")})
    monkeypatch.delattr(sys, "last_value", raising=False)
    monkeypatch.setattr(agent.flight, "status_raw", lambda: _status(1, 0))
    monkeypatch.setattr(agent.flight, "last_counters",
                        lambda wait_s: {"0": flight.Counters(enqueued=1, completed=1)})
    tracker = agent.Tracker(agent.Writer(str(tmp_path), 0), 0, Recorder())
    tracker.finish()
    path = tmp_path / "progress" / "rank-0.json"
    left = parse(path.read_text())
    assert left is not None and left.exited_at is not None and not left.groups["0"].in_flight
    monkeypatch.setattr(agent.flight, "status_raw", lambda: _status(2, 1))
    tracker.update(NOW + 60)
    assert parse(path.read_text()) == left
