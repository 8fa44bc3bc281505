"""The hang verdict over synthetic per-rank progress: each kind, the waiting graph, the
one-line cause for diagnose, and no verdict while collectives progress."""

from __future__ import annotations

from distrun.model.progress import GroupProgress, RankProgress, parse
from distrun.monitor.hang import HangVerdict, Kind, RankHealth, WaitEdge, cause_line, hang_verdict

NOW = 1000.0
WORLD = (0, 1, 2, 3)


def rank(r: int, enq: int, done: int, *, at: float = NOW - 20, op: str = "gloo:all_reduce",
         sizes: tuple[tuple[int, ...], ...] = ((1000,),), exited: float | None = None,
         world: tuple[int, ...] = WORLD) -> RankProgress:
    described = enq > done
    group = GroupProgress(pg="0", desc="default_pg", ranks=world, enqueued=enq, completed=done,
                          changed_at=at, op=op if described else "",
                          op_seq=enq if described else 0, sizes=sizes if described else (),
                          timeout_s=1800.0 if described else None)
    return RankProgress(rank=r, pid=100 + r, joined_at=NOW - 60, exited_at=exited,
                        groups={"0": group})


def health(**cpu: float) -> dict[int, RankHealth]:
    return {r: RankHealth(True, cpu.get(f"r{r}", 0.0)) for r in WORLD}


def test_kind_1_idle_culprit_named_with_the_collective_and_the_graph() -> None:
    states = {r: rank(r, 7, 6) for r in (0, 1, 3)} | {2: rank(2, 6, 6, at=NOW - 25)}
    v = hang_verdict(states, health(r2=0.0, r0=0.5), NOW, WORLD)
    assert isinstance(v, HangVerdict)
    assert v.kind is Kind.IDLE and v.culprits == (2,) and v.waiting == (0, 1, 3)
    assert (v.pg, v.seq, v.op, v.sizes, v.timeout_s) == ("0", 7, "gloo:all_reduce", ((1000,),),
                                                          1800.0)
    assert v.edges == tuple(WaitEdge(w, 2, "0", 7, "gloo:all_reduce") for w in (0, 1, 3))
    assert not v.must_stop
    text = v.message()
    assert text.startswith("rank 2 has not entered collective #7 (gloo:all_reduce [[1000]], "
                           "process group 0) that ranks 0, 1, 3 wait in for 20 s")
    assert "rank 2 is idle outside any collective (0% CPU; last entered collective #6)" in text
    graph = v.to_json()["waiting_graph"]
    assert graph[0] == {"waiter": 0, "culprit": 2, "pg": "0", "seq": 7, "op": "gloo:all_reduce"}


def test_kind_2_busy_culprit_is_a_warning_not_a_stop() -> None:
    states = {r: rank(r, 3, 2) for r in (1, 2, 3)} | {0: rank(0, 2, 2)}
    v = hang_verdict(states, health(r0=99.0), NOW, WORLD)
    assert v is not None and v.kind is Kind.BUSY and v.culprits == (0,)
    assert "rank 0 is busy outside the collective (99% CPU" in v.message()
    assert not v.must_stop


def test_kind_3_mismatch_names_the_odd_rank_and_every_op() -> None:
    states = {0: rank(0, 4, 3), 1: rank(1, 4, 3, op="gloo:broadcast"),
              2: rank(2, 4, 3), 3: rank(3, 4, 3)}
    v = hang_verdict(states, health(), NOW, WORLD)
    assert v is not None and v.kind is Kind.MISMATCH and v.culprits == (1,)
    assert v.must_stop and v.waiting == (0, 2, 3)
    assert "rank 1: gloo:broadcast [[1000]]" in v.message()
    assert "rank 0: gloo:all_reduce [[1000]]" in v.message()


def test_kind_3_two_ranks_same_op_different_shapes() -> None:
    states = {0: rank(0, 4, 3, sizes=((8,),), world=(0, 1)),
              1: rank(1, 4, 3, sizes=((9,),), world=(0, 1))}
    v = hang_verdict(states, {}, NOW, (0, 1))
    assert v is not None and v.kind is Kind.MISMATCH and v.culprits == (1,)


def test_kind_4_gone_is_named_at_once_and_stops() -> None:
    states = {0: rank(0, 2, 1, at=NOW - 0.3, world=(0, 1)),
              1: rank(1, 1, 1, exited=NOW - 0.5, world=(0, 1))}
    v = hang_verdict(states, {0: RankHealth(True, 0.0), 1: RankHealth(False)}, NOW, (0, 1))
    assert v is not None and v.kind is Kind.GONE and v.culprits == (1,) and v.must_stop
    assert "rank 1 exited after collective #1" in v.message()


def test_a_rank_that_never_joined_and_died_is_gone() -> None:
    states = {0: rank(0, 1, 0, world=(0, 1))}
    v = hang_verdict(states, {1: RankHealth(alive=False)}, NOW, (0, 1))
    assert v is not None and v.kind is Kind.GONE and v.culprits == (1,)


def test_no_verdict_while_progressing_or_before_the_threshold() -> None:
    done = {r: rank(r, 9, 9) for r in WORLD}
    assert hang_verdict(done, health(), NOW, WORLD) is None
    fresh = {r: rank(r, 7, 6, at=NOW - 2) for r in (0, 1, 3)} | {2: rank(2, 6, 6)}
    assert hang_verdict(fresh, health(), NOW, WORLD) is None
    same = {r: rank(r, 7, 6) for r in WORLD}  # all in the same collective: slow, not a hang
    assert hang_verdict(same, health(), NOW, WORLD) is None


def test_cause_line_for_diagnose_and_the_file_round_trip() -> None:
    states = {r: rank(r, 7, 6) for r in (0, 1, 3)} | {2: rank(2, 6, 6)}
    v = hang_verdict(states, health(), NOW, WORLD)
    assert v is not None
    assert cause_line(v.to_json()) == (
        "rank 2 hung outside collective #7 (gloo:all_reduce) while the others waited in it", [2])
    assert parse(states[0].dumps()) == states[0]
    assert parse("{not json") is None and parse('{"v": 1}') is None


def test_kind_4_after_the_end_gloo_counts_the_failed_collective_as_completed() -> None:
    """Rank 1 exited after #1; rank 0's #2 "completed" (failed) as it exited: rank 1 named."""
    states = {0: rank(0, 2, 2, at=NOW - 1, exited=NOW - 1, world=(0, 1)),
              1: rank(1, 1, 1, exited=NOW - 3, world=(0, 1))}
    dead = {0: RankHealth(alive=False), 1: RankHealth(alive=False)}
    v = hang_verdict(states, dead, NOW, (0, 1))
    assert v is not None and v.kind is Kind.GONE and v.culprits == (1,) and v.waiting == (0,)
    healthy_end = {r: rank(r, 5, 5, exited=NOW - 1, world=(0, 1)) for r in (0, 1)}
    assert hang_verdict(healthy_end, dead, NOW, (0, 1)) is None
