"""Engine behaviour on run directories: ordering across ranks, unknown errors, empty input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from distrun.diagnose import diagnose, to_json, write_text
from distrun.model.rundir import RunDirError

T0 = "2026-11-22T04:39:"


def make_run(tmp: Path, ranks: dict[int, list[str]], events: list[dict[str, object]]) -> Path:
    """A run directory in distrun launch's layout; lines are (seconds, text)."""
    run = tmp / "run"
    (run / "logs").mkdir(parents=True)
    plan = {"world_size": len(ranks), "backend": "nccl",
            "nodes": [{"node_rank": 0, "host": "gpu-a", "nproc": len(ranks),
                       "ranks": sorted(ranks)}]}
    (run / "plan.json").write_text(json.dumps(plan))
    for rank, lines in ranks.items():
        (run / "logs" / f"rank-{rank}.log").write_text("\n".join(lines) + "\n")
    started = {"time": T0 + "00.000000Z", "event": "workers_started",
               "ranks": {str(r): {"local_rank": r, "node_rank": 0, "host": "gpu-a"}
                         for r in ranks}}
    body = [started, *events]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in body))
    return run


def line(second: int, text: str, stream: str = "err") -> str:
    return f"{T0}{second:02d}.000000Z {stream} {text}"


def test_oom_on_one_rank_is_root_cause_and_timeouts_are_consequences(tmp_path: Path) -> None:
    timeout = ("[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
               "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds")
    run = make_run(tmp_path, {
        0: [line(1, "step 10 loss 2.1", "out"), line(40, timeout.format(r=0))],
        1: [line(1, "step 10 loss 2.1", "out"), line(20, "Traceback (most recent call last):"),
            line(20, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")],
        2: [line(39, timeout.format(r=2)), line(41, "RuntimeError: Connection closed by peer")],
    }, [])
    (run / "logs" / "launcher.log").write_text(
        line(45, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:") + "\n"
        + line(45, "  error_file: <N/A>") + "\n")
    result = to_json(diagnose([run]))
    root = result["causes"][0]
    assert root["id"] == "cuda-out-of-memory"
    assert (root["rank"], root["node"]) == (1, "gpu-a")
    assert root["evidence"][0]["file"].endswith("rank-1.log")
    assert root["evidence"][0]["line"] == 3
    consequences = {(c["rank"], c["id"]) for c in root["consequences"]}
    assert (0, "collective-timeout") in consequences
    assert (2, "peer-connection-closed") in consequences
    assert len(result["causes"]) == 1


@pytest.mark.parametrize(("exitcode", "expected"), [(0, None), (124, "slurm-allocation-mismatch")])
def test_a_run_that_ended_with_0_is_no_hang_whatever_its_log_ends_with(
        tmp_path: Path, exitcode: int, expected: str | None) -> None:
    """Lightning warns that srun is not used and prints nothing after it in a short healthy
    run: a hang tail; the run record says the job ended with 0, so nothing failed (seen on
    examples/lightning_trainer.py under distrun launch). A job distrun stopped keeps it."""
    warning = ("slurm.py:204: The `srun` command is available on your system but is not "
               "used. HINT: If your intention is to run Lightning on SLURM, prepend your python "
               "command with `srun` like so: srun python train.py ...")
    run = make_run(tmp_path, {0: [line(1, warning)], 1: [line(1, "step 1", "out")]},
                   [{"time": T0 + "52.000000Z", "event": "job_finished", "exitcode": exitcode}])
    causes = diagnose([run]).causes
    assert (causes[0].rule.id if causes else None) == expected


@pytest.mark.parametrize(("exitcode", "verdict"), [(0, "nothing-failed"), (1, "no-known-cause"),
                                                   (None, "no-known-cause")])
def test_a_failure_sign_is_read_only_when_the_job_did_not_end_with_0(
        tmp_path: Path, exitcode: int | None, verdict: str) -> None:
    """A logged traceback in a job that ended with 0 was handled; in a failed job, or one with
    no record of its end, it is the earliest error line (no cause named)."""
    events = [] if exitcode is None else [
        {"time": T0 + "52.000000Z", "event": "job_finished", "exitcode": exitcode}]
    run = make_run(tmp_path, {0: [line(1, "Traceback (most recent call last):"),
                                  line(2, "  File \"train.py\", line 9, in <module>")],
                              1: [line(1, "step 1", "out")]}, events)
    found = to_json(diagnose([run]))
    assert (found["verdict"], found["causes"]) == (verdict, [])
    signs = [(h["rank"], h["text"]) for h in found["unrecognised"]]
    assert signs == ([] if exitcode == 0 else [(0, "Traceback (most recent call last):")])


@pytest.mark.parametrize(("exitcode", "said"), [
    (0, "nothing failed."), (1, "the run record says the job ended with exit code 1."),
    (None, "no line in them says that the job failed.")])
def test_no_error_line_says_what_the_run_record_says(
        tmp_path: Path, exitcode: int | None, said: str) -> None:
    events = [] if exitcode is None else [
        {"time": T0 + "52.000000Z", "event": "job_finished", "exitcode": exitcode}]
    run = make_run(tmp_path, {0: [line(1, "step 1", "out")]}, events)
    out = io.StringIO()
    write_text(diagnose([run]), out)
    assert out.getvalue().splitlines()[0].endswith(f"file(s): {said}")


def test_a_failed_rank_s_exit_comes_with_its_failure_signs(tmp_path: Path) -> None:
    run = make_run(tmp_path, {1: [line(1, "Traceback (most recent call last):")]}, [
        {"time": T0 + "50.000000Z", "event": "rank_exited", "rank": 1, "exitcode": 1,
         "signal": None, "error_file": None},
        {"time": T0 + "52.000000Z", "event": "job_finished", "exitcode": 1}])
    found = to_json(diagnose([run]))
    assert found["failed_ranks"] == [{"rank": 1, "exitcode": 1, "signal": None}]
    assert [(h["rank"], h["text"]) for h in found["unrecognised"]] == [
        (1, "Traceback (most recent call last):")]


def test_earliest_primary_wins_across_ranks(tmp_path: Path) -> None:
    run = make_run(tmp_path, {
        0: [line(30, "torch.OutOfMemoryError: CUDA out of memory.")],
        3: [line(10, "RuntimeError: CUDA error: invalid device ordinal")],
    }, [])
    causes = to_json(diagnose([run]))["causes"]
    assert [(c["id"], c["rank"]) for c in causes] == [
        ("cuda-invalid-device-ordinal", 3), ("cuda-out-of-memory", 0)]


def test_sigkill_without_traceback_is_host_oom_on_that_rank(tmp_path: Path) -> None:
    run = make_run(tmp_path, {0: [line(1, "step 1", "out")], 1: [line(1, "step 1", "out")]}, [
        {"time": T0 + "50.000000Z", "event": "rank_exited", "rank": 1, "exitcode": -9,
         "signal": "SIGKILL", "error_file": None},
        {"time": T0 + "51.000000Z", "event": "rank_exited", "rank": 0, "exitcode": -15,
         "signal": "SIGTERM", "error_file": None},
        {"time": T0 + "52.000000Z", "event": "job_finished", "exitcode": 1},
    ])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["rank"], root["node"]) == ("host-oom-or-killed", 1, "gpu-a")
    assert root["evidence"][0]["file"].endswith("events.jsonl")


def test_sigkill_after_another_failure_is_not_the_cause(tmp_path: Path) -> None:
    run = make_run(tmp_path, {0: [line(5, "ValueError: bad shard index")], 1: []}, [
        {"time": T0 + "06.000000Z", "event": "rank_exited", "rank": 0, "exitcode": 1,
         "signal": None, "error_file": None},
        {"time": T0 + "40.000000Z", "event": "rank_exited", "rank": 1, "exitcode": -9,
         "signal": "SIGKILL", "error_file": None},
    ])
    result = to_json(diagnose([run]))
    assert result["causes"] == []
    assert result["unrecognised"][0]["rank"] == 0


def test_unknown_error_gives_no_known_cause_with_earliest_lines(tmp_path: Path) -> None:
    run = make_run(tmp_path, {
        0: [line(9, "RuntimeError: Connection closed by peer [10.0.0.2]:1234")],
        1: [line(3, "Traceback (most recent call last):"),
            line(3, "KeyError: 'labels' missing from batch")],
    }, [{"time": T0 + "04.000000Z", "event": "rank_exited", "rank": 1, "exitcode": 1,
         "signal": None, "error_file": None}])
    result = to_json(diagnose([run]))
    assert result["causes"] == []
    first = result["unrecognised"][0]
    assert (first["rank"], first["text"]) == (1, "KeyError: 'labels' missing from batch")
    assert result["failed_ranks"] == [{"rank": 1, "exitcode": 1, "signal": None}]


def test_error_json_is_read_with_its_rank(tmp_path: Path) -> None:
    run = make_run(tmp_path, {0: [], 1: []}, [])
    error_dir = run / "torchrun" / "abc" / "attempt_0" / "1"
    error_dir.mkdir(parents=True)
    extra = {"py_callstack": "Traceback ...", "timestamp": "1795000000"}
    message = {"message": {"message": "RuntimeError: CUDA error: invalid device ordinal",
                           "extraInfo": extra}}
    (error_dir / "error.json").write_text(json.dumps(message))
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["rank"]) == ("cuda-invalid-device-ordinal", 1)


def test_empty_dir_gives_empty_causes(tmp_path: Path) -> None:
    result = diagnose([tmp_path])
    assert to_json(result) == {"verdict": "nothing-failed", "confidence": None, "causes": [],
                               "unrecognised": [], "failed_ranks": [], "ends": [],
                               "out_of_memory": [], "skipped": []}
    assert not result.failed


def test_clean_run_has_no_causes(tmp_path: Path) -> None:
    run = make_run(tmp_path, {0: [line(1, "step 1 loss 2.0", "out")]}, [
        {"time": T0 + "09.000000Z", "event": "rank_exited", "rank": 0, "exitcode": 0,
         "signal": None, "error_file": None}])
    assert not diagnose([run]).failed


def test_plain_log_ranks_from_prefixes_and_position(tmp_path: Path) -> None:
    log = tmp_path / "out.txt"
    log.write_text("[rank2]: RuntimeError: CUDA error: invalid device ordinal\n"
                   "[rank0]: RuntimeError: Default process group has not been initialized\n")
    causes = to_json(diagnose([log]))["causes"]
    assert [(c["id"], c["rank"]) for c in causes] == [
        ("cuda-invalid-device-ordinal", 2), ("default-pg-not-initialized", 0)]


def test_rank_from_file_name(tmp_path: Path) -> None:
    (tmp_path / "worker_rank7.log").write_text("torch.OutOfMemoryError: CUDA out of memory.\n")
    assert to_json(diagnose([tmp_path]))["causes"][0]["rank"] == 7


def test_lines_split_across_chunks_are_found(tmp_path: Path, monkeypatch: object) -> None:
    from distrun.diagnose import matcher

    log = tmp_path / "big.log"
    filler = "".join(f"step {i} loss 1.0\n" for i in range(5000))
    log.write_text(filler + "RuntimeError: CUDA error: invalid device ordinal\n" + filler)
    monkeypatch.setattr(matcher, "CHUNK_BYTES", 4096)  # type: ignore[attr-defined]
    monkeypatch.setattr(matcher, "SMALL_BYTES", 1000)  # type: ignore[attr-defined]
    evidence = to_json(diagnose([log]))["causes"][0]["evidence"][0]
    assert evidence["line"] == 5001


def test_an_error_across_the_chunk_after_an_over_long_line_is_cut_is_found(
        tmp_path: Path, monkeypatch: object) -> None:
    """An over-long line is cut inside a chunk; its end (with the error) starts in that chunk
    and finishes in the next one: the bytes before the chunk boundary are kept."""
    from distrun.diagnose import matcher

    monkeypatch.setattr(matcher, "CHUNK_BYTES", 300_000)  # type: ignore[attr-defined]
    monkeypatch.setattr(matcher, "SMALL_BYTES", 1000)  # type: ignore[attr-defined]
    boundary = 1001 + 300_000  # the first read, then one chunk: where the third read starts
    error = "RuntimeError: CUDA error: invalid device ordinal"
    line = "y" * (boundary - 2 - len(error) + 10) + error  # its last 10 bytes: after the boundary
    assert len(line) > 262_144  # over-long: cut in the second read
    log = tmp_path / "one-long-line.log"
    log.write_text("x\n" + line + "\nstep 1 loss 0.5\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["evidence"][0]["line"]) == ("cuda-invalid-device-ordinal", 2)


def watchdog(rank: int, op: str, numel: int) -> str:
    return (f"[rank{rank}]:[E1206 18:44:12 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum=41, OpType={op}, NumelIn={numel}, "
            f"NumelOut={numel}, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.")


def test_timeouts_in_different_collectives_are_a_mismatch_not_a_timeout(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join([watchdog(0, "ALLREDUCE", 1024), watchdog(1, "ALLREDUCE", 1024),
                              watchdog(2, "BROADCAST", 1024), watchdog(3, "ALLREDUCE", 1024)]))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("collective-mismatch", 2, "medium")


def test_timeouts_with_different_sizes_are_a_mismatch(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join([watchdog(0, "ALLREDUCE", 1024), watchdog(1, "ALLREDUCE", 2048),
                              watchdog(2, "ALLREDUCE", 1024)]))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("collective-mismatch", 1)


def test_timeouts_at_different_sequence_numbers_of_one_group_are_a_mismatch(
    tmp_path: Path,
) -> None:
    # A collective completes on every rank of its group or on none: rank 1 stuck one
    # collective later than ranks 0 and 2 issued a collective they never did.
    log = tmp_path / "job.log"
    lines = [watchdog(r, "ALLREDUCE", 8).replace(f"[Rank {r}]", f"[PG ID 0 PG GUID 0 Rank {r}]")
             for r in range(3)]
    lines[1] = lines[1].replace("SeqNum=41", "SeqNum=42")
    log.write_text("\n".join(lines))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("collective-mismatch", 1, "medium")


def test_untagged_timeouts_at_different_sequence_numbers_stay_a_timeout(tmp_path: Path) -> None:
    # torch < 2.3 names no process group: ranks stuck in a tensor-parallel and a
    # data-parallel group have unrelated sequence numbers and operations
    log = tmp_path / "job.log"
    log.write_text("\n".join([watchdog(0, "ALLREDUCE", 8), watchdog(1, "ALLGATHER", 8)
                              .replace("SeqNum=41", "SeqNum=97")]))
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "collective-timeout"


def test_ranks_stuck_at_different_nccl_work_numbers_are_a_mismatch(tmp_path: Path) -> None:
    # torch >= 2.2 ProcessGroupNCCL.cpp: "Timeout at NCCL work: N, last enqueued NCCL work:
    # ..., last completed NCCL work: ..." on each rank; a pasted log may hold only these
    at = ("[rank{r}]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank {r}] Timeout at NCCL work: {n}, "
          "last enqueued NCCL work: {n}, last completed NCCL work: {m}.")
    log = tmp_path / "job.log"
    log.write_text("\n".join([at.format(r=0, n=12, m=11), at.format(r=1, n=13, m=12),
                              at.format(r=2, n=12, m=11)]))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("collective-mismatch", 1, "medium")


def test_watchdog_failures_at_different_work_ids_of_one_group_are_a_mismatch(
    tmp_path: Path,
) -> None:
    line = ("[rank{r}]:[E1107 ProcessGroupNCCL.cpp:2271] [PG ID 1 PG GUID 1 Rank {r}]  failure "
            "detected by watchdog at work sequence id: {n} PG status: last enqueued work: {n}, "
            "last completed work: {m}")
    log = tmp_path / "job.log"
    log.write_text("\n".join([line.format(r=0, n=57, m=56), line.format(r=1, n=58, m=57),
                              line.format(r=2, n=57, m=56)]))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("collective-mismatch", 1)


def coll(pid: int, dev: int, op: str, count: int, dtype: int = 7) -> str:
    # NCCL src/enqueue.cc with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL
    return (f"node1:{pid}:{pid} [{dev}] NCCL INFO {op}: opCount 3 sendbuff 0x7f00 recvbuff "
            f"0x7f00 count {count} datatype {dtype} op 0 root 0 comm 0x55{dev} [nranks=4] "
            f"stream 0x56{dev}")


def test_nccl_collective_lines_that_disagree_across_processes_are_a_mismatch(
    tmp_path: Path,
) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join([coll(10, 0, "AllReduce", 1024), coll(11, 1, "AllReduce", 1024),
                              coll(12, 2, "Broadcast", 53, 4), coll(13, 3, "AllReduce", 1024)]))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("collective-mismatch", "medium")
    assert "Broadcast" in root["evidence"][0]["text"]


def test_nccl_collective_lines_that_agree_name_no_cause(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join(coll(10 + r, r, "AllReduce", 1024) for r in range(4)))
    assert to_json(diagnose([log]))["verdict"] == "nothing-failed"


def test_old_torch_timeouts_in_different_operations_are_a_mismatch(tmp_path: Path) -> None:
    old = ("[E ProcessGroupNCCL.cpp:566] [Rank {r}] Watchdog caught collective operation timeout: "
           "WorkNCCL(OpType={op}, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing "
           "out.")
    log = tmp_path / "job.log"
    log.write_text("\n".join([old.format(r=0, op="BROADCAST"), old.format(r=1, op="ALLREDUCE"),
                              old.format(r=2, op="BROADCAST")]))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("collective-mismatch", 1)


def test_slurm_step_or_allocation_refused_for_another_reason_is_not_confident(
    tmp_path: Path,
) -> None:
    # slurm_errno.c: the reason after "Unable to create step" / "Unable to allocate
    # resources" says whether the request did not fit; a step of a job that is ending or
    # a wrong account is not an allocation mismatch
    log = tmp_path / "job.log"
    log.write_text("srun: error: Unable to create step for job 1234: Job/step already completing "
                   "or completed\n")
    assert to_json(diagnose([log]))["confidence"] != "high"
    log.write_text("srun: error: Unable to create step for job 1234: More processors requested "
                   "than permitted\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("slurm-allocation-mismatch", "high")


def test_a_sigbus_in_the_launcher_summary_points_at_shared_memory_with_low_confidence(
    tmp_path: Path,
) -> None:
    # torchelastic's summary (errors/__init__.py) for a worker killed by SIGBUS: in a
    # training job almost always /dev/shm (DataLoader or NCCL shared memory) running out
    log = tmp_path / "launcher.log"
    log.write_text("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                   "Root Cause (first observed failure):\n[0]:\n  rank      : 2 (local_rank: 2)\n"
                   "  exitcode  : -7 (pid: 1234)\n  error_file: <N/A>\n"
                   "  traceback : Signal 7 (SIGBUS) received by PID 1234\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("shm-bus-error", 2, "low")


def test_pipeline_stages_waiting_in_send_and_recv_stay_a_timeout(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join([watchdog(0, "SEND", 8), watchdog(1, "RECV", 8)
                              .replace("SeqNum=41", "SeqNum=40")]))
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "collective-timeout"


def test_timeouts_in_different_process_groups_stay_a_timeout(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join([watchdog(0, "ALLREDUCE", 8).replace("[Rank 0]", "[PG ID 0 Rank 0]"),
                              watchdog(1, "ALLGATHER", 8).replace("[Rank 1]", "[PG ID 3 Rank 1]")
                              .replace("SeqNum=41", "SeqNum=7")]))
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "collective-timeout"


def test_same_collective_everywhere_stays_a_timeout_and_names_the_silent_rank(
    tmp_path: Path,
) -> None:
    run = make_run(tmp_path, {r: [line(40 + r, watchdog(r, "ALLREDUCE", 8))] for r in (0, 1, 3)}
                   | {2: [line(1, "step 1", "out")]}, [])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("collective-timeout", "medium")
    assert "look in the log of rank 2" in root["note"]


def test_a_shared_wording_printed_after_a_timeout_is_teardown_not_the_cause(
    tmp_path: Path,
) -> None:
    # after the watchdog fired, the launcher's teardown prints "Killed" and "Connection
    # refused": wordings other failures share, which do not explain the timeout
    log = tmp_path / "job.log"
    log.write_text(watchdog(0, "ALLREDUCE", 8) + "\n[rank1]: Connection refused\nKilled\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("collective-timeout", "medium")
    log.write_text("[rank1]: Connection refused\n" + watchdog(0, "ALLREDUCE", 8) + "\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("rendezvous-timeout", "low")


def test_cause_later_in_the_file_beats_earlier_consequences(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(watchdog(0, "ALLREDUCE", 8) + "\n"
                   "[rank1]: RuntimeError: Connection reset by peer\n"
                   "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("cuda-out-of-memory", 3, "high")


def test_summary_only_points_at_the_rank_it_names(tmp_path: Path) -> None:
    log = tmp_path / "launcher.log"
    log.write_text("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                   "Root Cause (first observed failure):\n[0]:\n"
                   "  rank      : 5 (local_rank: 1)\n  exitcode  : 1 (pid: 42)\n"
                   "  error_file: <N/A>\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("elastic-summary-no-root-cause", 5)
    assert "look in the log of rank 5" in root["note"]


def test_cause_on_a_rank_other_than_the_first_failure_is_not_confident(tmp_path: Path) -> None:
    log = tmp_path / "launcher.log"
    summary = ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
               "Root Cause (first observed failure):\n[0]:\n"
               "  rank      : {rank} (local_rank: {rank})\n  exitcode  : 1 (pid: 42)\n")
    oom = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB\n"
    log.write_text(oom + summary.format(rank=5))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("cuda-out-of-memory", 3, "medium")
    log.write_text(oom + summary.format(rank=3))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("cuda-out-of-memory", 3, "high")


def test_weak_wording_alone_gives_low_confidence(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("step 9\nwarning: worker reported: Cannot allocate memory\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("host-oom-or-killed", "low")


def test_unknown_error_before_the_cause_lowers_confidence(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("ValueError: shard 7 is empty\n" + "step\n" * 20
                   + "RuntimeError: CUDA error: invalid device ordinal\n")
    result = to_json(diagnose([log]))
    assert (result["causes"][0]["id"], result["confidence"]) == (
        "cuda-invalid-device-ordinal", "medium")
    assert result["unrecognised"][0]["text"] == "ValueError: shard 7 is empty"


def test_distrun_stall_verdict_is_the_cause(tmp_path: Path) -> None:
    run = make_run(tmp_path, {0: [line(50, watchdog(0, "ALLREDUCE", 8))], 1: []}, [
        {"time": T0 + "30.000000Z", "event": "stalled", "rank": 1, "culprit": True},
        {"time": T0 + "30.000000Z", "event": "stall_verdict", "ranks": [1],
         "message": "rank 1 stalled in train.py:42; others wait in all_reduce", "action": "stop"},
        {"time": T0 + "31.000000Z", "event": "rank_exited", "rank": 1, "exitcode": -15,
         "signal": "SIGTERM", "error_file": None},
    ])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("distrun-stall", 1, "high")
    assert "rank 1 stalled in train.py:42" in root["evidence"][0]["text"]


def test_hang_named_by_the_instrumentation_is_the_cause(tmp_path: Path) -> None:
    """A job that hung and succeeded after all (rank 0 busy, the others waited): diagnose
    names the hang distrun recorded and its culprit, not 'nothing failed'."""
    run = make_run(tmp_path, {0: [line(1, "step 1", "out")], 1: []}, [
        {"time": T0 + "20.000000Z", "event": "hang", "kind": "busy", "kind_number": 2,
         "culprits": [0], "waiting": [1, 2, 3],
         "message": "rank 0 is busy outside collective #7 (gloo:barrier) that ranks 1-3 "
                    "wait in (40 s)"}])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["rank"]) == ("distrun-stall", 0)
    assert "rank 0 is busy outside collective #7" in root["evidence"][0]["text"]


def test_first_rank_ended_by_sigterm_is_stopped_externally(tmp_path: Path) -> None:
    run = make_run(tmp_path, {0: [line(1, "step 1", "out")]}, [
        {"time": T0 + "09.000000Z", "event": "rank_exited", "rank": 0, "exitcode": -15,
         "signal": "SIGTERM", "error_file": None}])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("stopped-externally", "medium")


def test_slurm_time_limit_beats_the_teardown_errors(tmp_path: Path) -> None:
    log = tmp_path / "slurm-42.out"
    log.write_text("step 90000\nslurmstepd: error: *** JOB 42 ON gpu7 CANCELLED AT "
                   "2026-11-22T04:00:00 DUE TO TIME LIMIT ***\n"
                   "[rank0]: RuntimeError: Connection reset by peer\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("stopped-externally", "high")


def test_exit_time_abort_after_a_real_cause_is_not_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("[rank2]: RuntimeError: CUDA error: invalid device ordinal\n"
                   "terminate called without an active exception\n")
    causes = to_json(diagnose([log]))["causes"]
    assert [c["id"] for c in causes] == ["cuda-invalid-device-ordinal", "exit-time-abort"]


def test_cuda_error_inside_a_frameworks_init_dist_is_the_frameworks_cuda_only_init(
    tmp_path: Path,
) -> None:
    log = tmp_path / "gcu.log"
    log.write_text(
        'Traceback (most recent call last):\n  File "tools/train.py", line 104, in main\n'
        "    init_dist(args.launcher)\n"
        '  File "/usr/lib/python3/site-packages/mmengine/dist/utils.py", line 130, in '
        "_init_dist_pytorch\n    torch.cuda.set_device(local_rank)\n"
        "RuntimeError: Found no NVIDIA driver on your system.\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "framework-cuda-only-init"
    assert "launcher='none'" in root["fix"][0]
    plain = tmp_path / "plain.log"
    plain.write_text("RuntimeError: Found no NVIDIA driver on your system.\n")
    assert to_json(diagnose([plain]))["causes"][0]["id"] == "cuda-unavailable"


def test_millions_of_error_lines_keep_only_the_earliest(tmp_path: Path) -> None:
    log = tmp_path / "noisy.log"
    log.write_text("[rank1]: RuntimeError: CUDA error: invalid device ordinal\n"
                   + "[rank0]: ValueError: retrying batch\n" * 200_000)
    from distrun.diagnose.engine import KEEP_PER_RANK, matcher_for, place
    from distrun.diagnose.rules import default_rules

    rules = default_rules()
    with log.open("rb") as stream:
        hits = place(matcher_for(rules).scan_stream(stream), None, str(log), rules)
    assert len(hits) == 1 + KEEP_PER_RANK
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("cuda-invalid-device-ordinal", 1)


# Messages as their sources write them (the format strings filled in), one per widened
# pattern: the rule must name the category whatever the surrounding log looks like.
SOURCE_MESSAGES = [
    # NCCL src/misc/socket.cc, src/transport/net_socket.cc, net_ib, bootstrap.cc (WARN(...))
    ("nccl-network", "n1:7:9 [0] misc/socket.cc:52 NCCL WARN Net : No interface found in the "
                     "same subnet as remote address 10.0.0.2<4242>"),
    ("nccl-network", "n1:7:9 [0] include/socket.h:344 WARN Socket creation failed : "
                     "Address family not supported by protocol"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN NET/Socket : no interface found"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN NET/IB : Unable to open device mlx5_0"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: "
                     "local catastrophic error"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN no device found matching eth9, verify "
                     "NCCL_OOB_NET_IFNAME"),
    # NCCL include/socket.h: a connect between ranks is the network, not the rendezvous
    ("nccl-network", "n1:7:9 [0] include/socket.h:409 NCCL WARN Net : Connect to "
                     "192.168.1.9<54263> failed : No route to host"),
    # gloo/transport/tcp/device.cc (sockaddrToInterfaceName) and pair.cc (connectLoop)
    ("nccl-network", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                     "device.cc:231] ifa != nullptr. Unable to find interface for: [10.1.1.1]:0"),
    ("nccl-network", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] "
                     "connect [127.0.1.1]:37915: Connection refused"),
    ("nccl-network", "RuntimeError: [/opt/conda/conda-bld/pytorch_1/work/third_party/gloo/gloo/"
                     "transport/tcp/pair.cc:144] no error"),
    # NCCL net_ib.cc / net_socket.cc: sizes that differ between ranks
    ("collective-mismatch", "n1:7:9 [1] NCCL WARN NET/IB : req 0/1 tag 7 peer 10.0.0.1<4545> "
                            "collective mismatch error, local size 4096 remote size 8192"),
    ("collective-mismatch", "n1:7:9 [1] NCCL WARN NET/Socket : peer 10.0.0.1<4545> message "
                            "truncated : receiving 1048576 bytes instead of 65536. If you believe "
                            "your socket network is in healthy state, there may be a mismatch"),
    # torch c10d ProcessGroupGloo (strings in libtorch_cpu.so)
    ("collective-mismatch", "RuntimeError: Received data size doesn't match expected size. Is "
                            "there a distributed collective mismatch in your code?"),
    # Slurm src/srun/*, src/common/slurm_opt.c, src/common/slurm_errno.c
    ("slurm-allocation-mismatch", "srun: error: CPU binding outside of job step allocation, "
                                  "allocated CPUs are: 0x0F."),
    ("slurm-allocation-mismatch", "srun: error: Unable to create step for job 1234: "
                                  "Insufficient GRES available in allocation"),
    ("slurm-allocation-mismatch", "srun: error: You asked for 8 tasks but hostlist specified "
                                  "2 nodes"),
    ("slurm-allocation-mismatch", "srun: fatal: --gpus-per-task is mutually exclusive with "
                                  "--ntasks-per-gpu and SLURM_NTASKS_PER_GPU"),
    ("slurm-allocation-mismatch", "srun: fatal: --gpus-per-node and --gres=gpu are mutually "
                                  "exclusive."),
    ("slurm-allocation-mismatch", "srun: fatal: Inconsistent values set to --ntasks-per-gpu=2 and "
                                  "--ntasks-per-tres=4"),
    ("slurm-allocation-mismatch", "srun: error: invalid number of tasks (-n 0)"),
    ("slurm-allocation-mismatch", "srun: error: Task launch for StepId=1932.2 failed on node "
                                  "n40: Unable to satisfy cpu bind request"),
    # glibc / libstdc++ symbol versioning (ld.so), as Python's ImportError shows it
    ("nccl-cuda-library-mismatch", "ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version "
                                   "`GLIBCXX_3.4.29' not found (required by "
                                   "/site-packages/torch/lib/libtorch_python.so)"),
    ("nccl-cuda-library-mismatch", "ImportError: /lib64/libc.so.6: version `GLIBC_2.28' not "
                                   "found (required by /site-packages/jaxlib/xla_extension.so)"),
    ("nccl-cuda-library-mismatch", "python: symbol lookup error: /site-packages/torch/lib/"
                                   "libtorch_cuda.so: symbol ncclCommRegister version "
                                   "NCCL_2.19.3 not defined in file libnccl.so.2 with link time "
                                   "reference"),
    # torchvision/extension.py _check_cuda_version
    ("nccl-cuda-library-mismatch", "RuntimeError: Detected that PyTorch and torchvision were "
                                   "compiled with different CUDA major versions. PyTorch has CUDA "
                                   "Version=11.8 and torchvision has CUDA Version=12.1."),
    # DeepSpeed op_builder/builder.py assert_no_cuda_mismatch
    ("nccl-cuda-library-mismatch", "Exception: Installed CUDA version 12.1 does not match the "
                                   "version torch was compiled with 11.8, unable to compile "
                                   "cuda/cpp extensions without a matching cuda version."),
    # apex setup.py check_cuda_torch_binary_vs_bare_metal
    ("nccl-cuda-library-mismatch", "RuntimeError: Cuda extensions are being compiled with a "
                                   "version of Cuda that does not match the version used to "
                                   "compile Pytorch binaries."),
    # cuDNN 8/9 frontend loader, TensorFlow dso_loader, Windows torch/__init__.py
    ("nccl-cuda-library-mismatch", "Could not load library libcudnn_cnn_infer.so.8. Error: "
                                   "libcudnn_cnn_infer.so.8: cannot open shared object file"),
    ("nccl-cuda-library-mismatch", "Unable to load any of {libcudnn_ops.so.9.1.0, "
                                   "libcudnn_ops.so.9.1, libcudnn_ops.so.9, libcudnn_ops.so}"),
    ("nccl-cuda-library-mismatch", "OSError: [WinError 126] The specified module could not be "
                                   "found. Error loading \"C:\\torch\\lib\\cudnn_adv_infer64_8.dll\" "
                                   "or one of its dependencies."),
    # XLA stream_executor cuda_dnn.cc; JAX jax/_src/lib (cuSPARSE etc. plugin checks)
    ("nccl-cuda-library-mismatch", "E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:439] "
                                   "Loaded runtime CuDNN library: 8.5.0 but source was compiled "
                                   "with: 8.6.0."),
    ("nccl-cuda-library-mismatch", "RuntimeError: Unable to load cuSPARSE. Is it installed?"),
    # CUDA runtime error strings (cudaGetErrorString), NVRTC, rocBLAS
    ("nccl-cuda-library-mismatch", "n1:7:9 [0] NCCL WARN Cuda failure 'PTX JIT compiler library "
                                   "not found'"),
    ("nccl-cuda-library-mismatch", "RuntimeError: CUDA error: device kernel image is invalid"),
    ("nccl-cuda-library-mismatch", "nvrtc: error: invalid value for --gpu-architecture (-arch)"),
    ("nccl-cuda-library-mismatch", "RuntimeError: nvrtc: error: failed to open "
                                   "libnvrtc-builtins.so.11.1."),
    ("nccl-cuda-library-mismatch", "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/"
                                   "TensileLibrary.dat: No such file or directory for GPU arch : "
                                   "gfx1031"),
    # torch ProcessGroupNCCL: NCCL error string ncclUnhandledCudaError (weak: a CUDA call failed)
    ("nccl-cuda-library-mismatch", "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, "
                                   "unhandled cuda error, NCCL version 2.14.3"),
    # torch/serialization.py _validate_device
    ("cuda-invalid-device-ordinal", "RuntimeError: Attempting to deserialize object on CUDA "
                                    "device 3 but torch.cuda.device_count() is 1. Please use "
                                    "torch.load with map_location to map your storages"),
    # lightning_fabric/accelerators/cuda.py find_usable_cuda_devices
    ("cuda-invalid-device-ordinal", "RuntimeError: You requested to find 4 devices but this "
                                    "machine only has 2 GPUs."),
    # torch distributed_c10d.py init_process_group(device_id=...)
    ("cuda-invalid-device-ordinal", "ValueError: device_id cuda:8 is out of range. Please use a "
                                    "device index less than the number of accelerators "
                                    "available: 8."),
    # torch c10d Backend.hpp, distributed_c10d.py split_group, ProcessGroupMPI.cpp, NCCLUtils
    ("backend-device-unsupported", "RuntimeError: Backend gloo does not support "
                                   "reduce_scatter_tensor_coalesced"),
    ("backend-device-unsupported", "RuntimeError: No backend for the parent process group or its "
                                   "backend does not support splitting"),
    ("backend-device-unsupported", "RuntimeError: CUDA tensor detected and the MPI used doesn't "
                                   "have CUDA-aware MPI support"),
    ("backend-device-unsupported", "RuntimeError: Unconvertible NCCL type Bool"),
    # torch distributed_c10d.py (backend-string parsing, default backends) and
    # ProcessGroupGloo.cpp (sparse allreduce); the MPS dispatcher's missing c10d kernels
    ("backend-device-unsupported", "ValueError: Unknown backend 'xccl'. Specify a "
                                   "'device:backend' string or use one of: ['gloo', 'nccl']"),
    ("backend-device-unsupported", "ValueError: Default backend not registered for device : xpu"),
    ("backend-device-unsupported", "RuntimeError: We detected accelerator npu on your machine. But "
                                   "we don't know which communication backend to use for this "
                                   "accelerator."),
    ("backend-device-unsupported", "ValueError: monitored_barrier is only implemented for GLOO "
                                   "backend."),
    ("backend-device-unsupported", "ValueError: Invalid device:backend pairing: cpu:gloo,cuda."),
    ("backend-device-unsupported", "RuntimeError: ProcessGroupGloo::allreduce: unsupported layout"),
    ("backend-device-unsupported", "NotImplementedError: The operator 'c10d::allgather_' is not "
                                   "currently implemented for the MPS device."),
    # torch c10d ProcessGroup*.cpp: "ProcessGroupX does not support <op>" (HCCL, Gloo, UCC...)
    ("backend-device-unsupported", "RuntimeError: ProcessGroupHCCL does not support alltoall_base"),
    # Windows: torch/__init__.py loading its DLLs (a missing VC++/CUDA runtime), Python's
    # extension loader; nvcc without the GPU's architecture; torch cpp_extension and
    # DeepSpeed op_builder without a CUDA toolkit
    ("nccl-cuda-library-mismatch", "OSError: [WinError 126] The specified module could not be "
                                   "found. Error loading \"C:\\Python311\\Lib\\site-packages\\"
                                   "torch\\lib\\fbgemm.dll\" or one of its dependencies."),
    ("nccl-cuda-library-mismatch", "ImportError: DLL load failed while importing _C: The "
                                   "specified module could not be found."),
    ("nccl-cuda-library-mismatch", "nvcc fatal   : Unsupported gpu architecture 'compute_89'"),
    ("nccl-cuda-library-mismatch", "ImportError: libc10.so: cannot open shared object file: No "
                                   "such file or directory"),
    ("nccl-cuda-library-mismatch", "OSError: CUDA_HOME environment variable is not set. Please "
                                   "set it to your CUDA install root."),
    ("nccl-cuda-library-mismatch", "deepspeed.ops.op_builder.builder.MissingCUDAException: "
                                   "CUDA_HOME does not exist, unable to compile CUDA op(s)"),
    # zsh job control after the OOM killer
    ("host-oom-or-killed", "[1]    12345 killed     python train.py"),
    # Ray's host OOM is not a device OOM (ray/exceptions.py OutOfMemoryError)
    ("host-oom-or-killed", "ray.exceptions.OutOfMemoryError: Task was killed due to the node "
                           "running low on memory."),
    # Windows ERROR_COMMITMENT_LIMIT (os error 1455) raised by torch/__init__.py's DLL loading;
    # numpy/core/_exceptions.py _ArrayMemoryError; errno ENOMEM from os.fork / mmap
    ("host-oom-or-killed", "OSError: [WinError 1455] The paging file is too small for this "
                           "operation to complete. Error loading \"C:\\torch\\lib\\cudnn64_8.dll\""),
    ("host-oom-or-killed", "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB "
                           "for an array with shape (1000, 1000, 1000) and data type float64"),
    ("host-oom-or-killed", "OSError: [Errno 12] Cannot allocate memory"),
    # bitsandbytes cuda_setup/main.py; TensorFlow/XLA dso_loader "Could not load symbol"
    ("nccl-cuda-library-mismatch", "RuntimeError: CUDA Setup failed despite GPU being available. "
                                   "Please run the following command to get more information:"),
    ("nccl-cuda-library-mismatch", "Could not load symbol cublasGetSmCountTarget from "
                                   "libcublas.so.11. Error: undefined symbol: cublasGetSmCountTarget"),
    # torch c10d: an op a backend lacks (weak: low confidence)
    ("backend-device-unsupported", "RuntimeError: all_to_all is not supported with the gloo backend"),
    # NCCL (older src/include/shm.h): the shared-memory segment does not fit in /dev/shm
    ("shm-bus-error", "n1:7:9 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : "
                      "No space left on device"),
    ("shm-bus-error", "n1:7:9 [0] include/shm.h:48 NCCL WARN Error: failed to extend "
                      "/dev/shm/nccl-0DWnBa to 9637892 bytes"),
    # Kaggle's kernel restart message after the container's memory limit
    ("host-oom-or-killed", "Your notebook tried to allocate more memory than is available. It "
                           "has restarted."),
    # torch/distributed/elastic/multiprocessing/api.py: a worker killed by a signal has a
    # negative exit code; errors/__init__.py writes "Signal 6 (SIGABRT) received by PID"
    ("elastic-summary-no-root-cause", "ERROR:torch.distributed.elastic.multiprocessing.api:failed "
                                      "(exitcode: -6) local_rank: 1 (pid: 1234) of binary: "
                                      "/usr/bin/python"),
    ("elastic-summary-no-root-cause", "  exitcode  : -11 (pid: 1234)"),
    ("elastic-summary-no-root-cause", "  traceback : Signal 6 (SIGABRT) received by PID 1234"),
    # torch/csrc/DataLoader.cpp worker signal handlers
    ("dataloader-worker-killed", "ERROR: Unexpected segmentation fault encountered in worker."),
    # bash/zsh job control and exit status 128+15 after SIGTERM (as 'Killed' / 137 for SIGKILL)
    ("stopped-externally", "/var/spool/slurmd/job1234/slurm_script: line 12: 56789 Terminated"
                           "              python train.py"),
    ("stopped-externally", "[1]+  Terminated              python train.py"),
    ("stopped-externally", "[1]    12345 terminated  python train.py"),
    ("stopped-externally", "Process finished with exit code 143 (interrupted by signal 15: SIGTERM)"),
    # Windows socket error 10048 in a Chinese locale (the English text is matched already)
    ("address-in-use", "RuntimeError: [enforce fail at C:\\torch\\gloo\\transport\\uv\\"
                       "address.cc] 通常每个套接字地址(协议/网络地址/端口)只允许使用一次。"),
    # the same errors in a zh_CN locale (glibc's strerror, Windows' message table)
    ("address-in-use", "OSError: [Errno 98] 地址已在使用"),
    ("host-oom-or-killed", "OSError: [Errno 12] 无法分配内存"),
    ("rendezvous-timeout", "RuntimeError: [WinError 10061] 由于目标计算机积极拒绝，无法连接。"),
    # Level Zero / Unified Runtime (Intel XPU), XLA's BFC allocator and TPU compiler, CANN
    ("cuda-out-of-memory", "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
    ("cuda-out-of-memory", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of "
                           "memory while trying to allocate 17179869184 bytes."),
    ("cuda-out-of-memory", "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
                           "memory in memory space hbm."),
    # CPython threading: a thread's exception at interpreter exit
    ("exit-time-abort", "Exception in thread Thread-3 (most likely raised during interpreter "
                        "shutdown):"),
    # torch/csrc/distributed/c10d/reducer.cpp and comm.cpp: the model differs between ranks
    ("collective-mismatch", "RuntimeError: DDP expects same model across all ranks, but Rank 1 "
                            "has 200 params, while rank 0 has inconsistent 100 params."),
    ("collective-mismatch", "RuntimeError: [1]: params[0] in this process with sizes [10, 5] "
                            "appears not to match sizes of the same param in process 0."),
    # CPython 3.12 threading.start_new_thread during finalisation
    ("exit-time-abort", "RuntimeError: can't create new thread at interpreter shutdown"),
    # DeepSpeed runtime/state_dict_factory.py: a model-parallel checkpoint of another size
    ("checkpoint-layout-mismatch", "AssertionError: Invalid checkpoints and world size for sd "
                                   "split"),
    # NCCL's "<address><port> failed : <strerror>" as torch repeats it after "Last error:"
    ("nccl-network", "Connect to 10.0.0.2<43001> failed : Connection refused"),
    # Slurm srun (a task's exit, prefix peeled) and DeepSpeed launcher/launch.py sigkill_handler
    ("elastic-summary-no-root-cause", "srun: error: node12: task 3: Exited with exit code 1"),
    ("elastic-summary-no-root-cause", "[ERROR] ['/usr/bin/python', '-u', 'train.py', "
                                      "'--local_rank=1'] exits with return code = 1"),
    # NCCL src/graph/paths.cc and src/transport/p2p.cc (WARN/INFO format strings filled in)
    ("gpu-p2p-broken", "n1:7:9 [0] NCCL WARN P2P is disabled between NVLINK connected GPUs 0 "
                       "and 1. This should not be the case given their connectivity, and is "
                       "probably due to a hardware issue."),
    ("gpu-p2p-broken", "n1:7:9 [1] NCCL WARN failed to peer with device 0(=1000): 217 peer "
                       "access is not supported between these two devices"),
    ("gpu-p2p-broken", "n1:7:9 [0] NCCL INFO Could not enable P2P between dev 0(=1000) and "
                       "dev 1(=2000)"),
    # nccl-tests src/common.cu: PRINT("# Out of bounds values : %d %s", errors, "FAILED")
    ("gpu-p2p-broken", "# Out of bounds values : 24 FAILED"),
    # Linux drivers/iommu/intel/dmar.c and amd/iommu.c fault reports (dmesg)
    ("gpu-p2p-broken", "DMAR: [DMA Read NO_PASID] Request device [41:00.0] fault addr "
                       "0xf8000000 [fault reason 0x06] PTE Read access is not set"),
    ("gpu-p2p-broken", "AMD-Vi: Event logged [INVALID_DEVICE_REQUEST device=0000:41:00.0 "
                       "pasid=0x00000 address=0xfffffffdf8000000 flags=0x0a00]"),
    # torch/distributed/flight_recorder/components/types.py MatchState names
    ("collective-mismatch", "Mismatch found: COLLECTIVE_DTYPE_MISMATCH between rank 0 and 1"),
    # accelerate/utils/operations.py verify_operation (ACCELERATE_DEBUG_MODE)
    ("collective-mismatch", "accelerate.utils.operations.DistributedOperationException: Cannot "
                            "apply desired operation due to shape mismatches. All shapes across "
                            "devices must be valid."),
    # Megatron-LM training/checkpointing.py check_checkpoint_args (_compare)
    ("checkpoint-layout-mismatch", "AssertionError: tensor_model_parallel_size value from "
                                   "checkpoint (2) is not equal to the input argument value (4)."),
    # TensorFlow core/kernels/assign_op.h (a restore into a variable of another shape)
    ("checkpoint-layout-mismatch", "InvalidArgumentError: Assign requires shapes of both tensors "
                                   "to match. lhs shape= [4] rhs shape= [2]"),
    # torch/distributed/checkpoint/utils.py find_state_dict_object
    ("checkpoint-layout-mismatch", "ValueError: Could not find shard at '[0, 512]' for FQN: "
                                   "'model.layers.0.weight'"),
    # a C++ extension built against another torch: the missing symbol is torch's own ABI
    ("nccl-cuda-library-mismatch", "ImportError: /opt/venv/lib/python3.10/site-packages/ext/"
                                   "_C.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev"),
    ("nccl-cuda-library-mismatch", "ImportError: ext.so: undefined symbol: "
                                   "_ZNK2at6Tensor7is_cudaEv"),
    # torch 1.x distributed_c10d.py on a build without NCCL (Windows; the old 'bulit' typo)
    ("cuda-unavailable", "RuntimeError: Distributed package doesn't have NCCL bulit in"),
    # Slurm src/common/slurm_protocol_defs.c job state; Linux mm/oom_kill.c
    ("host-oom-or-killed", "State: OUT_OF_MEMORY (exit code 0)"),
    ("host-oom-or-killed", "oom_reaper: reaped process 4242 (python), now anon-rss:0kB"),
    ("host-oom-or-killed", "Worker 3 received signal 9"),
    # joblib/loky process_executor.py TerminatedWorkerError
    ("host-oom-or-killed", "TerminatedWorkerError: A worker process managed by the executor was "
                           "unexpectedly terminated. This could be caused by a segmentation fault "
                           "while calling the function or by an excessive memory usage causing "
                           "the Operating System to kill the worker."),
    # Slurm src/common/slurm_errno.c (sbatch/srun rejecting the request)
    ("slurm-allocation-mismatch", "srun: error: Unable to create step: Task count specification "
                                  "invalid"),
    ("slurm-allocation-mismatch", "sbatch: error: Duplicate generic resource (gres) "
                                  "specification"),
    ("slurm-allocation-mismatch", "srun: error: Unable to layout tasks on given cpus"),
    # Horovod common/controller.cc ConstructResponse checks and its stall inspector
    ("collective-mismatch", "horovod.common.exceptions.HorovodInternalError: Mismatched "
                            "ALLREDUCE tensor shapes: One rank sent a tensor of shape [10], but "
                            "another rank sent a tensor of shape [12]."),
    ("collective-mismatch", "Mismatched data types: One rank had type float32, but another rank "
                            "had type int64."),
    ("collective-mismatch", "One or more tensors were submitted to be reduced, gathered or "
                            "broadcasted by subset of ranks and are waiting for remainder of "
                            "ranks for more than 60 seconds."),
    # DeepSpeed launcher/runner.py with no GPU visible
    ("cuda-unavailable", "RuntimeError: Unable to proceed, no GPU resources available"),
    # Open MPI btl_tcp help text and btl_tcp_endpoint.c; aws-ofi-nccl's WARNs
    ("nccl-network", "WARNING: Open MPI accepted a TCP connection from what appears to be a"),
    ("nccl-network", "[n1][[1234,1],0][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_"
                     "connect] connect() to 192.168.1.2 failed: No route to host (113)"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN NET/OFI Only EFA provider is supported"),
    # MPICH/Intel MPI hydra's exit block, Open MPI's mpirun, DeepSpeed and torchelastic agents
    ("elastic-summary-no-root-cause", "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"),
    ("elastic-summary-no-root-cause", "mpirun has exited due to process rank 0 with PID 0 on"),
    ("elastic-summary-no-root-cause", "[launch.py:123:sigkill_handler] Killing subprocess 4242"),
    ("elastic-summary-no-root-cause", "[default] Worker group FAILED. 3/3 attempts left; will "
                                      "restart worker group"),
    ("host-oom-or-killed", "=   KILLED BY SIGNAL: 9 (Killed)"),
    # Kubernetes container status (kubectl describe pod), Jupyter's kernel restarter
    ("host-oom-or-killed", "    Last State:  Terminated  Reason: Error  ExitCode: 137"),
    ("host-oom-or-killed", "The kernel appears to have died. It will restart automatically."),
    # glibc's dlopen error for the NVIDIA driver library (no driver installed or mounted)
    ("cuda-unavailable", "ImportError: libcuda.so.1: cannot open shared object file: No such "
                         "file or directory"),
    # NCCL src/init.cc WARNs across ranks
    ("nccl-cuda-library-mismatch", "n1:7:9 [0] init.cc:1043 NCCL WARN Mismatched NCCL version "
                                   "detected : rank 0 version 21903 rank 1 version 21805"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN Detected mixed local Net device counts across ranks "
                     "(min 4, max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to ignore."),
    # CUDA samples simpleP2P (its peer-access report and its data check), Linux amd/iommu.c,
    # HIP's peer errors, torch.cuda.can_device_access_peer, vLLM custom_all_reduce.py
    ("gpu-p2p-broken", "> Peer access from NVIDIA GeForce RTX 4090 (GPU0) -> NVIDIA GeForce "
                       "RTX 4090 (GPU1) : No"),
    ("gpu-p2p-broken", "Verification error @ element 1: val = nan, ref = 4.000000"),
    ("gpu-p2p-broken", "AMD-Vi: Completion-Wait loop timed out"),
    ("gpu-p2p-broken", "RuntimeError: HIP error: hipErrorPeerAccessNotEnabled"),
    ("gpu-p2p-broken", ">>> torch.cuda.can_device_access_peer(0, 1) -> False"),
    ("gpu-p2p-broken", "WARNING custom_all_reduce.py:137] Custom allreduce is disabled because "
                       "your platform lacks GPU P2P capability or P2P test failed."),
    # RCCL src/init.cc at communicator init (ROCm install FAQ: multi-GPU hangs without
    # iommu=pt); lspci -vvv's ACS control with source validation on (NCCL troubleshooting: ACS)
    ("gpu-p2p-broken", "n1:402:402 [0] /src/rccl/hipify/src/init.cc:179 NCCL WARN Missing "
                       "\"iommu=pt\" from kernel command line which can lead to system "
                       "instablity or hang!"),
    ("gpu-p2p-broken", "                ACSCtl: SrcValid+ TransBlk- ReqRedir- CmpltRedir- "
                       "UpstreamFwd- EgressCtrl- DirectTrans-"),
    # CUDA driver API error names (cuda.h) for errors 803/804/209, as JAX/XLA and TF print them
    ("nccl-cuda-library-mismatch", "failed call to cuInit: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_"
                                   "DEVICE: forward compatibility was attempted on non supported "
                                   "HW"),
    ("nccl-cuda-library-mismatch", "RuntimeError: CUDA error: cudaErrorNoKernelImageForDevice"),
    ("nccl-cuda-library-mismatch", "failed call to cuInit: CUDA_ERROR_INSUFFICIENT_DRIVER"),
    # glibc's symbol-version error and a missing CUDA runtime registration symbol (an
    # extension built with another CUDA)
    ("nccl-cuda-library-mismatch", "ImportError: /opt/venv/lib/libcublas.so.11: version "
                                   "`libcublasLt.so.11' not found (required by "
                                   "/opt/venv/lib/libtorch_cuda.so)"),
    ("nccl-cuda-library-mismatch", "ImportError: ext_cuda.so: undefined symbol: "
                                   "__cudaPopCallConfiguration"),
    # torch ProcessGroupNCCL.cpp watchdog (torch >= 2.2 wording); Slurm's seff job state
    ("collective-timeout", "torch.distributed.DistBackendError: [Rank 1] Watchdog: WorkNCCL("
                           "SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)"
                           " ran for 600021 milliseconds before timing out."),
    ("stopped-externally", "State: TIMEOUT (exit code 0)"),
    # Megatron-LM dist_checkpointing/dict_utils.py merge() of the common state on resume
    ("checkpoint-layout-mismatch", "ValueError: Cannot merge two lists with different lengths "
                                   "(1 and 4, encountered at level ('optimizer', 0))"),
    # rulesH pass 3, from the messages' sources:
    # Open MPI's MPI_ERR_TRUNCATE class (ompi/errhandler); CANN HCCL error code EI0005
    ("collective-mismatch", "[n1:1234] *** MPI_ERR_TRUNCATE: message truncated"),
    ("collective-mismatch", "EI0005: The arguments for collective communication are inconsistent "
                            "between ranks: tag [HcomAllReduce_1], parameter [count], local "
                            "[1024], remote [2048]"),
    # CUDA driver API names (cuda.h) and runtime strings (cudaGetErrorString)
    ("gpu-p2p-broken", "RuntimeError: CUDA error: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"),
    ("gpu-p2p-broken", "RuntimeError: CUDA error: peer access has not been enabled"),
    ("nccl-cuda-library-mismatch", "RuntimeError: CUDA error: CUDA driver is a stub library"),
    ("nccl-cuda-library-mismatch", "RuntimeError: CUDA error: API call is not supported in the "
                                   "installed CUDA driver"),
    # NVML's nvmlErrorString (nvidia-smi, pynvml) after a driver upgrade without reboot
    ("nccl-cuda-library-mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
    ("nccl-cuda-library-mismatch", "ImportError: libsycl.so.7: cannot open shared object file: "
                                   "No such file or directory"),
    # Megatron-LM dist_checkpointing (strategies/torch.py, zarr.py) _validate_global_shapes;
    # DeepSpeed utils/zero_to_fp32.py parse_optim_states
    ("checkpoint-layout-mismatch", "megatron.core.dist_checkpointing.core.CheckpointingException: "
                                   "Global shape mismatch for loaded (torch.Size([1024, 512])) and "
                                   "expected ((2048, 512)) tensor for key decoder.weight"),
    ("checkpoint-layout-mismatch", "ValueError: Expected 8 of '*_optim_states.pt' under "
                                   "'ckpt/global_step100' but found 4 files. Possibly due to an "
                                   "overwrite of an old checkpoint"),
    # Open MPI help-mpi-btl-openib.txt, btl_openib_component.c handle_wc; bml r2 unreachable
    ("nccl-network", "[n1][[1234,1],0][btl_openib_component.c:3644:handle_wc] from n1 to: n2 "
                     "error polling LP CQ with status RETRY EXCEEDED ERROR status number 12"),
    ("nccl-network", "The InfiniBand retry count between two MPI processes has been exceeded."),
    ("nccl-network", "At least one pair of MPI processes are unable to reach each other for MPI "
                     "communications."),
    # MPICH/Intel MPI hydra's exit block; Ray's ActorDiedError
    ("elastic-summary-no-root-cause", "=   YOUR APPLICATION TERMINATED WITH THE EXIT STRING: "
                                      "Segmentation fault (signal 11)"),
    ("elastic-summary-no-root-cause", "ray.exceptions.RayActorError: The actor died unexpectedly "
                                      "before finishing this task."),
    # Kubernetes events, systemd-oomd's kill log line, launcher exit codes
    ("host-oom-or-killed", "Container train was OOM killed"),
    ("host-oom-or-killed", "systemd-oomd[812]: Killed /user.slice/user-1000.slice/session-2.scope "
                           "due to memory pressure for /user.slice being 92.31% > 50.00%"),
    ("host-oom-or-killed", "ERROR: torch.distributed.elastic: exit code: -9"),
    # torch mps allocator, NCCL include/alloc.h, TensorFlow BFC allocator
    ("cuda-out-of-memory", "RuntimeError: MPS backend out of memory (MPS allocated: 17.97 GB, "
                           "other allocations: 240.00 KB, max allowed: 18.13 GB)."),
    ("cuda-out-of-memory", "n1:7:9 [0] include/alloc.h:48 NCCL WARN Failed to CUDA calloc "
                           "4194304 bytes"),
    ("cuda-out-of-memory", "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.0KiB"),
    # libc++ on macOS when gloo's threads outlive the interpreter
    ("exit-time-abort", "libc++abi: terminating due to uncaught exception of type "
                        "std::__1::system_error: mutex lock failed: Invalid argument"),
    # subprocess.CalledProcessError (accelerate launch, torch.distributed.launch) for a worker
    # that died of a signal; Ray's ActorDiedError text
    ("elastic-summary-no-root-cause", "subprocess.CalledProcessError: Command '['python', "
                                      "'train.py']' died with <Signals.SIGSEGV: 11>."),
    ("elastic-summary-no-root-cause", "The actor is dead because its worker process has died. "
                                      "Worker exit type: SYSTEM_ERROR"),
    ("host-oom-or-killed", "subprocess.CalledProcessError: Command 'python train.py' returned "
                           "non-zero exit status -9."),
    # Slurm slurm_errno.c ESLURM_INVALID_TASK_MEMORY
    ("slurm-allocation-mismatch", "sbatch: error: Memory specification can not be satisfied"),
    # vLLM executor/ray_utils.py placement-group check (more workers than GPUs)
    ("cuda-invalid-device-ordinal", "ValueError: The number of required GPUs exceeds the total "
                                    "number of available GPUs in the placement group."),
    # CANN acl_rt error codes (107001 ACL_ERROR_RT_INVALID_DEVICEID) as torch_npu prints them
    ("ascend-hccl", "RuntimeError: NPU error, error code is 107001"),
    ("ascend-hccl", "[ERROR] RUNTIME(1234,python):2024-01-01-00:00:00.000.000 [api_c.c:123]1234 "
                    "rtSetDevice: ErrCode=107001, desc=[invalid device id], InnerCode=0x7070001"),
    # cudnnStatus_t (cudnn_ops_infer.h / cudnn_graph.h): a cuDNN sub-library of another release
    ("nccl-cuda-library-mismatch", "RuntimeError: cuDNN error: CUDNN_STATUS_VERSION_MISMATCH"),
    # UCX/NCCL ibverbs calls (the locked-memory limit, a missing HCA); NCCL binding an
    # address that is not on this host's interface
    ("nccl-network", "UCX  ERROR   ibv_create_qp(...) failed: Cannot allocate memory"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN NET/Socket : Failed to bind to 10.0.0.9<0>: Cannot "
                     "assign requested address"),
    # torch 2.0/2.1 ProcessGroupNCCL.cpp spelled it "retreiving"
    ("collective-timeout", "RuntimeError: [1] is setting up NCCL communicator and retreiving "
                           "ncclUniqueId from [0] via c10d key-value store by key '0', but "
                           "store->get('0') got error: Socket Timeout"),
    # Ray's GCS / other servers binding a taken port; Winsock WSAEADDRINUSE
    ("address-in-use", "Fatal error: port 6379 already in use"),
    ("address-in-use", "ERROR: [Errno 10048] error while attempting to bind on address "
                       "('0.0.0.0', 29500)"),
    # NCCL's generic invalid-usage class through torch (NCCLUtils.hpp): weak, low confidence
    ("duplicate-gpu", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
                      "distributed/c10d/NCCLUtils.hpp:317, invalid usage (run with "
                      "NCCL_DEBUG=WARN for details), NCCL version 2.20.5"),
    # NCCL src (WARN strings): init.cc, bootstrap.cc, misc/cudawrap.cc, misc/socket.cc,
    # net.cc; gloo transport/tcp/pair.cc's receive-size enforce
    ("duplicate-gpu", "n1:7:9 [0] NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
                      "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this"),
    ("world-size-mismatch", "n1:7:9 [0] NCCL WARN Bootstrap Root : mismatch in info from procs, "
                            "nranks 8 vs 16, nroots 1 vs 1, iroot 0 vs 0, offset 0"),
    ("nccl-cuda-library-mismatch", "n1:7:9 [0] NCCL WARN CUDA Driver version found is 11040. "
                                   "Minimum requirement is 12000"),
    ("nccl-cuda-library-mismatch", "n1:7:9 [0] NCCL WARN NCCL library is too old. This "
                                   "application was compiled with NCCL version 2.21.5, but is "
                                   "running with NCCL 2.18.1"),
    ("collective-mismatch", "n1:7:9 [0] NCCL WARN Message truncated : received 4096,2 bytes "
                            "instead of 2048,2"),
    ("collective-mismatch", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/"
                            "tcp/pair.cc:510] op.preamble.roffset + op.preamble.length <= "
                            "op.buf->size_. 4096 vs 2048"),
    ("shm-bus-error", "n1:7:9 [0] NCCL WARN Error while attaching to shared memory segment "
                      "/dev/shm/nccl-abc (size 9637888)"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN Net : error encountered when getting address info : "
                     "Name or service not known"),
    ("nccl-network", "n1:7:9 [0] NCCL WARN Failed to initialize any NET plugin"),
    # NCCL net_ib printIbWcStatusHint: IBV_WC_LOC_PROT_ERR is, "in many cases", ACS
    ("gpu-p2p-broken", "n1:7:9 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> "
                       "with status=4 opcode=0 len=0 vendor err 81 (Recv)\nn1:7:9 [0] NCCL INFO "
                       "HINT: In many cases this error occurs when ACS is enabled which would "
                       "break GPU Direct RDMA protocol."),
    # Intel SYCL/UR and ROCm HSA runtime error names for exhausted device resources (weak)
    ("cuda-out-of-memory", "RuntimeError: Native API failed. Native API returns: -5 "
                           "(PI_ERROR_OUT_OF_RESOURCES) -5 (PI_ERROR_OUT_OF_RESOURCES)"),
    # Slurm slurmstepd when the tasks ignore the signals at cancel/time limit; OpenSSH's
    # "Killed by signal 15." (SIGTERM, not the OOM killer's SIGKILL)
    ("stopped-externally", "slurmstepd: error: *** JOB 1234 STEPD TERMINATED ON n1 AT "
                           "2024-01-01T00:00:00 DUE TO JOB NOT ENDING WITH SIGNALS ***"),
    ("stopped-externally", "Killed by signal 15."),
    ("stopped-externally", "[2024-01-01 00:00:00] received signal SIGTERM"),
    # DeepSpeed checkpoint/ds_to_universal.py and comm/comm.py (mpi_discovery)
    ("checkpoint-layout-mismatch", "FileNotFoundError: Missing ZeRO optimizer checkpoint for "
                                   "rank 6"),
    ("checkpoint-layout-mismatch", "ValueError: Checkpoint ZeRO file count 12 is not divisible "
                                   "by model-state file count 8"),
    ("world-size-mismatch", "AssertionError: MPI world size 8 does not match torch world size 4"),
    ("host-oom-or-killed", "Process 4242 exited with code -9"),
    # Megatron-LM training/checkpointing.py after loading the checkpoint's args
    ("checkpoint-layout-mismatch", "AssertionError: (TP, PP) mismatch after resume ((2, 4) vs "
                                   "(4, 2) from checkpoint)"),
    # torch/distributed: distributed_c10d.py (recv_object_list), run.py
    # (--nproc_per_node=gpu without CUDA), a build without gloo
    ("collective-mismatch", "AssertionError: Mismatch in return ranks for object sizes and "
                            "objects."),
    ("cuda-unavailable", "ValueError: Cuda is not available."),
    ("backend-device-unsupported", "RuntimeError: Distributed package doesn't have Gloo built in"),
    # torch ATen cudnn Conv_v8.cpp (no cuDNN engine for this GPU/version, weak); rocBLAS's
    # Tensile lookup for a gfx target the build lacks (weak)
    ("nccl-cuda-library-mismatch", "RuntimeError: GET was unable to find an engine to execute "
                                   "this computation"),
    ("nccl-cuda-library-mismatch", "rocBLAS warning: No paths matched /opt/rocm/lib/rocblas/"
                                   "library/*gfx1031*co. Make sure that ROCBLAS_TENSILE_LIBPATH is "
                                   "set correctly."),
    # c10 DeviceGuardImplInterface (a torch build without that backend); SYCL/Level Zero with
    # no GPU visible (Intel XPU)
    ("cuda-unavailable", "RuntimeError: PyTorch is not linked with support for xpu devices"),
    ("cuda-unavailable", "RuntimeError: Native API failed. Native API returns: -1 "
                         "(PI_ERROR_DEVICE_NOT_FOUND) -1 (PI_ERROR_DEVICE_NOT_FOUND)"),
    # the kernel's OOM killer named in capitals (job schedulers, cloud consoles)
    ("host-oom-or-killed", "Process was killed by the OOM killer"),
    # Lightning fabric/connector.py, accelerators/cuda.py, utilities/device_parser.py
    ("cuda-unavailable", "RuntimeError: No supported gpu backend found!"),
    ("cuda-unavailable", "lightning.fabric.utilities.exceptions.MisconfigurationException: GPUs "
                         "requested but none are available."),
    ("cuda-unavailable", "MisconfigurationException: You requested to find 4 devices but there "
                         "are no visible CUDA devices on this machine."),
    ("duplicate-gpu", "MisconfigurationException: Device ID's (GPU) must be unique."),
    # torchvision/extension.py _assert_has_ops; the op registry when torchvision's _C was
    # built for another torch
    ("nccl-cuda-library-mismatch", "RuntimeError: Couldn't load custom C++ ops. This can happen "
                                   "if your PyTorch and torchvision versions are incompatible, or "
                                   "if you had errors while compiling torchvision from source."),
    ("nccl-cuda-library-mismatch", "RuntimeError: operator torchvision::nms does not exist"),
    # jax/_src/distributed.py (initialize without a cluster environment, called late or twice)
    ("jax-coordination", "RuntimeError: jax.distributed.initialize() must be called before any "
                         "JAX calls that might initialise the XLA backend."),
    ("jax-coordination", "ValueError: Number of processes must be defined."),
    ("jax-coordination", "RuntimeError: distributed.initialize should only be called once."),
    # Open MPI help-mpi-btl-openib-cpc-base.txt and help-oob-tcp.txt
    ("nccl-network", "No OpenFabrics connection schemes reported that they were able to be used "
                     "on a specific port."),
    ("nccl-network", "A process or daemon was unable to complete a TCP connection to another "
                     "process:"),
    # torch/utils/data/dataloader.py (worker IPC lost to the file-descriptor limit) and the
    # multiprocessing fd passing it relies on; HF datasets' map with num_proc (weak wordings)
    ("dataloader-worker-killed", "RuntimeError: Too many open files. Communication with the "
                                 "workers is no longer possible. Please increase the limit using "
                                 "`ulimit -n` in the shell"),
    ("dataloader-worker-killed", "RuntimeError: received 0 items of ancdata"),
    ("host-oom-or-killed", "RuntimeError: One of the subprocesses has abruptly died during map "
                           "operation.To debug the error, disable multiprocessing."),
    # torch >= 2.4 ProcessGroupNCCL.cpp: the watchdog's failure line, the flight-recorder dump
    # request and the abort that follows
    ("collective-timeout", "[rank3]:[E1107 ProcessGroupNCCL.cpp:1686] [PG ID 0 PG GUID "
                           "0(default_pg) Rank 3] Received a dump signal due to a collective "
                           "timeout from this local rank and we will try our best to dump the "
                           "debug info. Last enqueued NCCL work: 12, last completed NCCL work: 11."),
    ("collective-timeout", "[rank1]:[E1107 ProcessGroupNCCL.cpp:2271] [PG ID 1 PG GUID 1 Rank 1]  "
                           "failure detected by watchdog at work sequence id: 57 PG status: last "
                           "enqueued work: 57, last completed work: 56"),
    ("collective-timeout", "[rank0]:[F1107 ProcessGroupNCCL.cpp:1613] [PG ID 0 PG GUID "
                           "0(default_pg) Rank 0] Terminating the process after attempting to "
                           "dump debug info, due to collective timeout or exception."),
    # torch/distributed/flight_recorder (fr_trace) components/types.py and builder.py
    ("collective-mismatch", "Expected collective type: 'allreduce' does not match found "
                            "collective type: 'broadcast'"),
    ("collective-mismatch", "Input/output mismatch in the collective sequence number: 41"),
    # mmcv/mmdet runner/dist_utils.py _init_dist_pytorch: set_device(rank % num_gpus) raises
    # with no GPU (ZeroDivisionError) or a CUDA-less build
    ("framework-cuda-only-init", "  File \"/site-packages/mmcv/runner/dist_utils.py\", line 33, in "
                                 "_init_dist_pytorch\n    torch.cuda.set_device(rank % num_gpus)\n"
                                 "ZeroDivisionError: integer division or modulo by zero"),
    # torch/utils/cpp_extension.py building an extension where no GPU is visible (weak)
    ("cuda-unavailable", "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'"),
    # a c10::CUDAError escaping at interpreter exit (weak)
    ("exit-time-abort", "terminate called after throwing an instance of 'c10::CUDAError'"),
    # NCCL src/init.cc ncclGetErrorString(ncclInternalError), newer wording (weak)
    ("nccl-network", "Test NCCL failure common.cu:959 'internal error - please report this "
                     "issue to the NCCL developers / '"),
]


@pytest.mark.parametrize(("rule", "text"), SOURCE_MESSAGES)
def test_source_messages_name_their_category(tmp_path: Path, rule: str, text: str) -> None:
    log = tmp_path / "job.log"
    log.write_text("step 100 loss 1.0\n" + text + "\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == rule


def test_summary_root_cause_block_names_the_rank_after_the_other_failures(
    tmp_path: Path,
) -> None:
    # torch/distributed/elastic/multiprocessing/errors/error_handler + __init__.py: the
    # "Failures:" section comes first, "Root Cause (first observed failure):" last.
    log = tmp_path / "launcher.log"
    block = ("[{i}]:\n  time      : 2024-05-01_10:00:0{i}\n  host      : node1\n"
             "  rank      : {rank} (local_rank: {rank})\n  exitcode  : 1 (pid: 4{i})\n"
             "  error_file: <N/A>\n")
    log.write_text("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
                   "train.py FAILED\nFailures:\n" + block.format(i=1, rank=3)
                   + "Root Cause (first observed failure):\n" + block.format(i=0, rank=2))
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("elastic-summary-no-root-cause", 2)
    assert "look in the log of rank 2" in root["note"]


def test_old_torch_summary_names_the_global_rank_of_the_sigkill(tmp_path: Path) -> None:
    # torch 1.9 wrote "rank: 5 (local_rank: 1)" and "exitcode: -9 (pid: ...)"
    log = tmp_path / "launcher.log"
    log.write_text("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
                   "local_rank: 1 (pid: 1235) of binary: /usr/bin/python3\n"
                   "Root Cause:\n[0]:\n  time: 2021-08-01_10:00:00\n"
                   "  rank: 5 (local_rank: 1)\n  exitcode: -9 (pid: 1235)\n"
                   "  error_file: <N/A>\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("host-oom-or-killed", 5)


def test_job_script_pasted_after_the_error_is_its_context(tmp_path: Path) -> None:
    log = tmp_path / "issue.log"
    error = "RuntimeError: CUDA error: invalid device ordinal\n"
    script = "slurm script used:\n#!/bin/bash\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-task=1\n"
    log.write_text(error + script)
    assert to_json(diagnose([log]))["causes"][0]["id"] == "slurm-allocation-mismatch"
    log.write_text(error)
    assert to_json(diagnose([log]))["causes"][0]["id"] == "cuda-invalid-device-ordinal"


def test_a_startup_warning_never_outranks_the_error(tmp_path: Path) -> None:
    # xformers/__init__.py warns at import on a build mismatch; the run then fails otherwise
    log = tmp_path / "job.log"
    log.write_text("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was "
                   "built for:\n    PyTorch 2.0.1+cu118 with CUDA 1108 (you have 2.1.0+cu121)\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "cuda-out-of-memory"


def test_informational_plugin_and_dlopen_lines_name_no_cause(tmp_path: Path) -> None:
    # NCCL src/plugin/net.cc probing libnccl-net.so (absent: the internal transport is
    # used); TensorFlow's dso_loader probing libcudart on a machine without a GPU
    log = tmp_path / "job.log"
    log.write_text("n1:7:7 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : "
                   "libnccl-net.so: cannot open shared object file: No such file or directory\n"
                   "W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not "
                   "load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot "
                   "open shared object file: No such file or directory\n"
                   "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system "
                   "error, NCCL version 2.14.3\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("nccl-network", "low")
    # the same probe pasted without its prefix, TF's advice after it, a real failure later
    log.write_text("Could not load dynamic library 'libcudart.so.11.0'; dlerror: libcudart.so."
                   "11.0: cannot open shared object file: No such file or directory\n"
                   "Ignore above cudart dlerror if you do not have a GPU set up on your "
                   "machine.\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                   "2.00 GiB (GPU 0; 15.78 GiB total capacity)\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["confidence"]) == ("cuda-out-of-memory", "high")


def test_torch_probing_ipv6_localhost_is_not_a_rendezvous_failure(tmp_path: Path) -> None:
    # torch c10d socket.cpp (2.0-2.2) warns and tries the next address; the launcher's
    # summary is what is left
    log = tmp_path / "job.log"
    log.write_text("[W socket.cpp:601] [c10d] The client socket has failed to connect to "
                   "[localhost]:29500 (errno: 99 - Cannot assign requested address).\n"
                   "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "elastic-summary-no-root-cause"
    log.write_text("[W socket.cpp:601] [c10d] The client socket has failed to connect to "
                   "[node2]:29500 (errno: 111 - Connection refused).\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "rendezvous-timeout"


def test_monitored_barrier_names_the_rank_it_waited_for(tmp_path: Path) -> None:
    # torch ProcessGroupGloo.cpp monitoredBarrier, on the rank that did arrive
    log = tmp_path / "job.log"
    log.write_text("[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but "
                   "received errors while waiting for send/recv from rank 0. Please check rank 0 "
                   "logs for faulty rank.\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "collective-timeout"
    assert "look in the log of rank 0" in root["note"]


def test_ultralytics_device_check_with_devices_visible_is_an_ordinal(tmp_path: Path) -> None:
    # ultralytics/utils/torch_utils.py select_device: the check, then what torch sees
    log = tmp_path / "job.log"
    check = ("ValueError: Invalid CUDA 'device=4' requested. Use 'device=cpu' or pass valid CUDA "
             "device(s) if available, i.e. 'device=0' or 'device=0,1,2,3' for Multi-GPU.\n\n")
    log.write_text(check + "torch.cuda.is_available(): True\ntorch.cuda.device_count(): 2\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "cuda-invalid-device-ordinal"
    log.write_text(check + "torch.cuda.is_available(): False\ntorch.cuda.device_count(): 0\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "cuda-unavailable"


def test_signal_numbers_are_read_in_a_paste_that_lost_its_newlines(tmp_path: Path) -> None:
    # torch/distributed/elastic/multiprocessing/api.py SignalException, pasted as one line
    log = tmp_path / "issue.log"
    log.write_text("torch.distributed.elastic.multiprocessing.api.SignalException: Process 40121 "
                   "got signal: 15 Traceback (most recent call last): File \"run.py\", line 8\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "stopped-externally"
    log.write_text("torch.distributed.elastic.multiprocessing.api.SignalException: Process 40121 "
                   "got signal: 9 Traceback (most recent call last): File \"run.py\", line 8\n")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "host-oom-or-killed"


def test_weak_wording_after_an_unknown_error_gives_no_known_cause(tmp_path: Path) -> None:
    # torch >= 2.4 warns "process group has NOT been destroyed" whenever a rank exits
    # without destroy_process_group, after any crash: it does not explain the crash
    log = tmp_path / "job.log"
    log.write_text("[rank1]: ValueError: label 7 is out of range for this head\n"
                   "[rank1]:[W ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT "
                   "been destroyed before we destruct ProcessGroupNCCL.\n")
    result = to_json(diagnose([log]))
    assert result["causes"] == []
    assert "ValueError: label 7" in result["unrecognised"][0]["text"]


def test_store_barrier_of_a_later_group_is_only_weak_world_size_evidence(tmp_path: Path) -> None:
    # torch distributed_c10d.py _store_based_barrier: the default group's key is
    # store_based_barrier_key:1 (torch < 2.1, worker_count=) or :0 (num_workers_joined=); a
    # later key is a new_group() one rank has not reached: the world size itself was right.
    default = ("RuntimeError: Timed out initializing process group in store based barrier on "
               "rank: 3, for key: store_based_barrier_key:1 (world_size=8, worker_count=7, "
               "timeout=0:30:00)")
    later = ("I0510 07:28:04.417845 1398 distributed_c10d.py:337] Waiting in store based barrier "
             "to initialize process group for rank: 2, key: store_based_barrier_key:2 "
             "(world_size=8, worker_count=7, timeout=0:30:00)")
    found = []
    for name, text in (("default", default), ("later", later)):
        log = tmp_path / f"{name}.log"
        log.write_text("step 1\n" + text + "\n")
        root = to_json(diagnose([log]))["causes"][0]
        found.append((root["id"], root["confidence"]))
    assert found == [("world-size-mismatch", "high"), ("world-size-mismatch", "low")]


def test_torch_2_3_cudnn_plan_warning_is_no_error(tmp_path: Path) -> None:
    """torch 2.3.0 warns "Plan failed with a cudnnException ... CUDNN_STATUS_NOT_SUPPORTED" and
    trains on (pytorch/pytorch#121834): before a summary-only paste it is not the earliest
    error, so the verdict is the summary's, naming the rank to look at; a cuDNN
    EXECUTION_FAILED error, which is a real failure, is still an error."""
    warning = ("/opt/conda/lib/python3.10/site-packages/torch/autograd/graph.py:744: UserWarning:"
               " Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: "
               "cudnnFinalize Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED "
               "(Triggered internally at ../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)")
    summary = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
               "=" * 60, "train.py FAILED", "-" * 60, "Root Cause (first observed failure):",
               "[0]:", "  host      : node1", "  rank      : 1 (local_rank: 1)",
               "  exitcode  : 1 (pid: 142)", "  error_file: <N/A>", "=" * 60]
    log = tmp_path / "paste.log"
    log.write_text("\n".join([warning, *summary]) + "\n")
    result = diagnose([log])
    assert [(c.rule.id, c.rank) for c in result.causes] == [("elastic-summary-no-root-cause", 1)]
    failed = warning.replace("cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: "
                             "cudnnFinalize Descriptor Failed cudnn_status: "
                             "CUDNN_STATUS_NOT_SUPPORTED",
                             "CuDNNError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
    log.write_text("\n".join([failed, "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
                              *summary]) + "\n")
    result = diagnose([log])
    assert result.causes == ()
    assert "CUDNN_STATUS_EXECUTION_FAILED" in result.unrecognised[0].text


def test_a_rank_that_exits_silently_is_named_with_its_exit_code(tmp_path: Path) -> None:
    # rank 1 calls os._exit(3) mid-training; rank 0's next read from it fails (gloo pair.cc)
    reset = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
             "[127.0.0.1]:17122: Connection reset by peer. This is typically caused by a remote "
             "worker hanging or bugs in the application.")
    run = make_run(tmp_path, {0: [line(5, reset)], 1: [line(4, "step 2", "out")]}, [
        {"time": T0 + "06.000000Z", "event": "rank_exited", "rank": 0, "exitcode": -15,
         "signal": "SIGTERM", "error_file": None, "role": "stopped or failed after"},
        {"time": T0 + "06.000000Z", "event": "rank_exited", "rank": 1, "exitcode": 3,
         "signal": None, "error_file": None, "role": "first failure"},
    ])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["rank"], root["confidence"]) == ("peer-connection-closed", 1, "medium")
    assert "look in the log of rank 1 (the run record names it as the first failure)" in root["note"]
    assert "rank 1 ended with exit code 3 and printed no error before it" in root["note"]


def test_a_silent_exit_is_not_claimed_for_a_rank_that_printed_an_error(tmp_path: Path) -> None:
    run = make_run(tmp_path, {
        0: [line(5, "RuntimeError: Connection reset by peer")],
        1: [line(7, "Traceback (most recent call last):"), line(7, "KeyError: 'labels'")],
    }, [{"time": T0 + "08.000000Z", "event": "rank_exited", "rank": 1, "exitcode": 3,
         "signal": None, "error_file": None, "role": "first failure"}])
    root = to_json(diagnose([run]))["causes"][0]
    assert (root["id"], root["rank"]) == ("peer-connection-closed", 1)
    assert "look in the log of rank 1" in root["note"]
    assert "printed no error" not in root["note"]


@pytest.mark.parametrize("planted", ["logs/rank-1.log", "events.jsonl",
                                     "torchrun/x/attempt_0/1/error.json"])
def test_links_planted_in_a_run_directory_are_named_not_followed(tmp_path: Path,
                                                                 planted: str) -> None:
    secret = tmp_path / "someone-elses.log"
    secret.write_text("torch.OutOfMemoryError: CUDA out of memory. SECRET-TOKEN-1234\n")
    run = make_run(tmp_path, {0: [line(5, "KeyError: 'labels'")]}, [])
    link = run / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(secret)
    with pytest.raises(RunDirError) as refused:
        diagnose([run])
    assert str(refused.value).startswith(f"{link} is a symbolic link, not a regular file")
    assert "SECRET-TOKEN" not in str(refused.value)


def test_run_records_that_cannot_be_read_are_said_not_dropped(tmp_path: Path) -> None:
    """A torn or corrupt events.jsonl line was left out of the verdict without a word."""
    run = make_run(tmp_path, {0: [line(1, "RuntimeError: CUDA error: invalid device ordinal")]},
                   [])
    (run / "plan.json").unlink()  # this helper's plan is not a whole one: one problem less
    with (run / "events.jsonl").open("a") as out:
        out.write("{\"event\": \"rank_exit\", \"rank\": 0, \"exitc\n" + "\x1b[2Jnot json\n" * 7)
    found = diagnose([run])
    assert found.causes[0].rule.id == "cuda-invalid-device-ordinal"
    shown = to_json(found)["skipped"]
    assert len(found.skipped) == 8 and len(shown) == 5
    assert shown[0].startswith("events.jsonl:2: not JSON") and "\x1b" not in "".join(shown)
    out = io.StringIO()
    write_text(found, out)
    assert "Left out (could not be read): 8 run record(s)\n  events.jsonl:2: not JSON" in \
        out.getvalue()
    assert "\x1b" not in out.getvalue()
