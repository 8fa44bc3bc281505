"""Verification and stall verdicts as pure functions over rank states."""

from __future__ import annotations

from distrun.monitor import stall, verify
from distrun.monitor.samples import DeviceReading, DeviceSample
from distrun.monitor.state import RankState


def ranks(n: int, **extra: object) -> dict[int, RankState]:
    return {r: RankState(r, node_rank=0, local_rank=r, pid=100 + r, joined_at=1.0, **extra)
            for r in range(n)}


def test_missing_ranks_are_named_by_node_and_local_rank() -> None:
    states = ranks(4)
    states[3].joined_at = None
    check = verify.joined([0, 1, 2, 3], states, 0, 8)
    assert check.severity == "error"
    assert check.message == ("3/4 ranks on node 0 joined (world size 8); missing: rank 3 "
                             "(node 0, local rank 3)")


def test_used_device_without_process_or_utilisation_is_named() -> None:
    states = ranks(2)
    states[0].device, states[1].device = "cuda:0", "cuda:1"
    reading = DeviceReading((DeviceSample(4, utilization_percent=55.0, pids=(100,)),
                             DeviceSample(5, utilization_percent=0.0, pids=(101,))), "nvml")
    checks = verify.device_activity("cuda", [4, 5], states, reading, 0)
    assert [c.message for c in checks] == [
        "cuda device 5 (rank 1 (node 0, local rank 1)) shows 0% utilisation after the first "
        "steps"]


def test_unavailable_metrics_are_a_note_not_a_warning() -> None:
    checks = verify.device_activity("npu", [0], ranks(1), DeviceReading(unavailable="no tool"),
                                    0)
    assert [(c.severity, c.message) for c in checks] == [
        ("info", "device utilisation not available: no tool")]


def test_a_rank_that_joined_but_never_beat_is_stalled_after_the_timeout() -> None:
    states = ranks(2)
    states[0].first_beat = states[0].beat_time = 100.0
    assert stall.stalled(states, 104.0, 5.0) == []
    assert [s.rank for s in stall.stalled(states, 106.0, 5.0)] == [0, 1]
    states[0].beat_time = 105.5
    assert [s.rank for s in stall.stalled(states, 106.0, 5.0)] == [1]


def test_verdict_blames_the_rank_outside_a_collective() -> None:
    states = ranks(3, step=7, beat_time=10.0)
    in_c10d = stall.Stack('  File "/x/torch/distributed/distributed_c10d.py", line 1 in '
                          "all_reduce", "faulthandler")
    asleep = stall.Stack('Thread 0x1 (most recent call first):\n  File "/job/train.py", line '
                         "12 in main", "faulthandler")
    blamed, text = stall.verdict(list(states.values()), {0: in_c10d, 1: asleep, 2: in_c10d},
                                 16.0, 5.0, stopping=True)
    assert [s.rank for s in blamed] == [1]
    assert text.startswith("rank 1 (node 0, local rank 1) stalled: no heartbeat for 6.0 s "
                           "(last step 7, --stall-timeout 5 s); it hangs at File "
                           '"/job/train.py", line 12 in main; ranks 0, 2 wait for it')


def test_all_ranks_in_collectives_points_at_another_node() -> None:
    states = ranks(2, step=3, beat_time=0.0)
    in_c10d = stall.Stack('  File "/x/torch/distributed/distributed_c10d.py", line 1 in '
                          "barrier", "faulthandler")
    blamed, text = stall.verdict(list(states.values()), {0: in_c10d, 1: in_c10d}, 40.0, 30.0,
                                 stopping=False)
    assert len(blamed) == 2
    assert "the rank holding them up is not on this node" in text
    assert text.endswith("--stall-action warn: the job keeps running")
