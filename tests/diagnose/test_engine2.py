"""Engine readings added in session 6: hang tails, repeated once-per-process lines, ..."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from distrun.diagnose import diagnose, matcher, to_json
from distrun.diagnose.matcher import END_ID, LAST_ID, Matcher
from distrun.diagnose.rules import default_rules

# nccl-tests (src/common.cu) start-up as it prints it, then NCCL_DEBUG=INFO init lines.
NCCL_TESTS_HEAD = [
    "./build/all_reduce_perf -b 8 -e 256M -f 2 -g 4",
    "# nThread 1 nGpus 4 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20",
    "#",
    "# Using devices",
    *[f"#   Rank  {r} Pid  15833 on gpu-a device  {r} [0x0{r}] GeForce GTX 1080 Ti" for r in range(4)],
    "gpu-a:15833:15833 [0] NCCL INFO Bootstrap : Using [0]eth0:10.2.3.32<0>",
    "NCCL version 2.4.8+cuda10.0",
    "gpu-a:15833:15833 [3] NCCL INFO nranks 4",
    "gpu-a:15833:15833 [0] NCCL INFO Setting affinity for GPU 0 to ff00ff",
]
# what nccl-tests prints when the run finishes
NCCL_TESTS_DONE = [
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 20.04",
    "#",
]


def verdict(tmp_path: Path, lines: list[str]) -> tuple[str | None, str | None, int | None]:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    found = diagnose([log])
    if not found.causes:
        return None, None, None
    root = found.causes[0]
    return root.rule.id, root.confidence, root.rank


def test_nccl_tests_that_stop_after_init_are_a_p2p_hang_at_low_confidence(tmp_path: Path) -> None:
    assert verdict(tmp_path, NCCL_TESTS_HEAD) == ("gpu-p2p-broken", "low", None)


def test_nccl_tests_that_finished_are_no_hang(tmp_path: Path) -> None:
    assert verdict(tmp_path, NCCL_TESTS_HEAD + NCCL_TESTS_DONE) == (None, None, None)


HEADER = ("#       size         count      type   redop    root     time   algbw   busbw "
          "#wrong     time   algbw   busbw #wrong")


def test_a_healthy_nccl_tests_run_with_its_table_is_no_failure(tmp_path: Path) -> None:
    rows = [f"   {8 << k:>9}  {2 << k:>12}     float     sum      -1    10.50    0.00    0.00      0"
            for k in range(4)]
    assert verdict(tmp_path, [*NCCL_TESTS_HEAD, HEADER, *rows, *NCCL_TESTS_DONE]) == (None, None, None)


def test_nccl_tests_stuck_after_the_table_header_are_a_p2p_hang(tmp_path: Path) -> None:
    assert verdict(tmp_path, [*NCCL_TESTS_HEAD, HEADER]) == ("gpu-p2p-broken", "low", None)


def test_nccl_info_lines_after_a_hang_tail_still_end_in_a_hang(tmp_path: Path) -> None:
    setup = [f"gpu-a:15833:15833 [{i % 4}] NCCL INFO Channel {i:02d}/32 : 0[0] -> 1[1] via P2P/IPC"
             for i in range(200)]
    assert verdict(tmp_path, [*NCCL_TESTS_HEAD, *setup, ""]) == ("gpu-p2p-broken", "low", None)


def test_a_hang_tail_far_from_the_end_of_the_log_is_no_hang(tmp_path: Path) -> None:
    steps = [f"step {i} loss 0.{i:03d}" for i in range(40)]
    assert verdict(tmp_path, NCCL_TESTS_HEAD + steps) == (None, None, None)


def test_a_hang_tail_gives_way_to_any_error_line(tmp_path: Path) -> None:
    unknown = [*NCCL_TESTS_HEAD, "ValueError: bad config value 'x'"]
    assert verdict(tmp_path, unknown) == (None, None, None)
    oom = [*NCCL_TESTS_HEAD, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert verdict(tmp_path, oom)[0] == "cuda-out-of-memory"


def test_the_end_mark_names_the_last_line_small_and_chunked() -> None:
    matcher = Matcher(default_rules())
    for data in (b"a\nb\nc\n", b"a\nb\nc", b"a\nb\nc\n\nh:1:1 [0] NCCL INFO x\n"):
        ends = [h.line for h in matcher.scan_stream(io.BytesIO(data), end=True) if h.rule_id == END_ID]
        assert ends == [3]
    big = b"x" * 100 + b"\n"
    data = big * 50_000 + b"tail"  # over SMALL_BYTES: read by chunks
    ends = [h.line for h in matcher.scan_stream(io.BytesIO(data), end=True) if h.rule_id == END_ID]
    assert ends == [data.count(b"\n") + 1]
    assert not [h for h in matcher.scan_stream(io.BytesIO(b"a\n")) if h.rule_id == END_ID]


@pytest.mark.parametrize("data", [
    b"a\nb\nc\n", b"a\nb\nc", b"a\nb\nc\n\n \n", b"a\nb\n\x1b[2Kc 10%\rc 100%\r\x1b[A\n\n",
    b"a\nb\n" + b"c 1%|#|\r" * 30_000 + b"c 100%|##|"])  # a progress bar of 300 KB, no end
def test_the_last_line_is_shown_small_and_chunked(data: bytes, monkeypatch: pytest.MonkeyPatch,
                                                  ) -> None:
    """Where a log stopped: its last line that is not blank (a progress bar's last redraw),
    the same whether the file is read whole or by chunks."""
    def last(stream_data: bytes) -> list[tuple[int, str]]:
        hits = Matcher(default_rules()).scan_stream(io.BytesIO(stream_data), end=True)
        return [(h.line, h.text) for h in hits if h.rule_id == LAST_ID]

    whole = last(data)
    assert whole[0][0] == 3 and whole[0][1] in ("c", "c 100%", "c 100%|##|")
    big = b"x" * 100 + b"\n"
    monkeypatch.setattr(matcher, "SMALL_BYTES", 1000)
    assert last(big * 30 + data) == [(whole[0][0] + 30, whole[0][1])]
    monkeypatch.setattr(matcher, "CHUNK_BYTES", 250)  # several chunks, lines across their ends
    assert last(big * 30 + data) == [(whole[0][0] + 30, whole[0][1])]
    assert last(b"\n \n") == []


def test_ends_are_given_only_when_no_error_was_found(tmp_path: Path) -> None:
    quiet, failed = tmp_path / "quiet.log", tmp_path / "failed.log"
    quiet.write_text("step 1 loss 2.0\nstep 2 loss 1.9\n\n")
    failed.write_text("step 1 loss 2.0\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    assert to_json(diagnose([quiet]))["ends"] == [
        {"file": str(quiet), "line": 2, "text": "step 2 loss 1.9"}]
    assert to_json(diagnose([quiet, failed]))["ends"] == []


RAY_LOST = [
    "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
    "\tclass_name: RayWorkerWrapper",
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker "
    "exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There "
    "are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to "
    "high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly "
    "due to SIGSEGV or other unexpected errors.",
]


def test_ray_s_list_of_guesses_for_a_lost_worker_is_no_out_of_memory(tmp_path: Path) -> None:
    """The raylet prints the same three guesses for every worker whose connection dropped:
    the lost worker is a consequence (its cause is in its own log), not a host OOM."""
    assert verdict(tmp_path, RAY_LOST)[0] == "elastic-summary-no-root-cause"
    oom = ("(raylet) node_manager.cc:3035: 1 Workers (tasks / actors) killed due to memory "
           "pressure (OOM), 0 Workers crashed due to other reasons at node")
    assert verdict(tmp_path, [*RAY_LOST, oom])[0] == "host-oom-or-killed"


LIGHTNING = "initializing ddp: GLOBAL_RANK: {r}, MEMBER: {m}/8"
NEW_LIGHTNING = "Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {m}/4"


def test_two_processes_claiming_one_global_rank_are_an_allocation_mismatch(tmp_path: Path) -> None:
    # two nodes each started ranks 0-3 of a world of 8 (pytorch_lightning < 1.6 wording)
    lines = ["GPU available: True, used: True"]
    for r in (1, 2, 3, 0):
        lines += [LIGHTNING.format(r=r, m=r + 1)] * 2
    assert verdict(tmp_path, lines) == ("slurm-allocation-mismatch", "medium", None)


def test_a_repeated_rank_apart_in_the_log_counts_too(tmp_path: Path) -> None:
    lines = [NEW_LIGHTNING.format(r=r, m=r + 1) for r in (0, 1, 0, 1)]
    assert verdict(tmp_path, lines) == ("slurm-allocation-mismatch", "medium", None)


def test_a_line_copied_by_a_tee_with_its_rank_prefix_is_no_mismatch(tmp_path: Path) -> None:
    lines = []
    for r in range(4):
        lines += [f"[rank{r}]: " + NEW_LIGHTNING.format(r=r, m=r + 1)] * 2
    assert verdict(tmp_path, lines) == (None, None, None)


def test_distinct_global_ranks_are_no_mismatch(tmp_path: Path) -> None:
    lines = [NEW_LIGHTNING.format(r=r, m=r + 1) for r in range(4)]
    assert verdict(tmp_path, lines) == (None, None, None)


def test_a_repeated_rank_does_not_beat_a_real_error(tmp_path: Path) -> None:
    lines = [NEW_LIGHTNING.format(r=r, m=r + 1) for r in (0, 1, 0, 1)]
    lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert verdict(tmp_path, lines)[0] == "cuda-out-of-memory"


def test_srun_labels_of_two_nodes_on_one_rank_count_even_next_to_each_other(
        tmp_path: Path) -> None:
    # srun --label: tasks 0-11 of node 0 and 12-23 of node 1 (--ntasks 24, world size 12)
    lines = [f"{node * 12 + r}: " + NEW_LIGHTNING.format(r=r, m=r + 1).replace("/4", "/12")
             for r in (0, 9, 10, 11) for node in (0, 1)]
    assert verdict(tmp_path, lines) == ("slurm-allocation-mismatch", "medium", 12)


def test_repeated_lines_in_a_literal_newline_paste_count(tmp_path: Path) -> None:
    pasted = "\\n".join(NEW_LIGHTNING.format(r=r, m=r + 1) for r in (0, 1, 0, 1))
    assert verdict(tmp_path, [pasted])[:2] == ("slurm-allocation-mismatch", "medium")


def test_a_repeated_rank_then_only_the_launchers_summary_is_still_the_mismatch(
        tmp_path: Path) -> None:
    lines = [NEW_LIGHTNING.format(r=r, m=r + 1) for r in (0, 1, 0, 1)]
    lines.append("srun: error: node12: task 3: Exited with exit code 1")
    assert verdict(tmp_path, lines)[:2] == ("slurm-allocation-mismatch", "medium")


# distrun's own HANG line (src/distrun/monitor/hang.py HangVerdict.message)
def test_distrun_hang_lines_name_the_culprit_rank(tmp_path: Path) -> None:
    mismatch = ("distrun: HANG (kind 3, mismatch): collective mismatch at collective #12 "
                "(ALLREDUCE [1024], process group 0): rank 0: in ALLREDUCE; rank 1: in "
                "BROADCAST: rank 1 entered a different op or shape than the others; it can "
                "never complete")
    assert verdict(tmp_path, [mismatch]) == ("collective-mismatch", "high", 1)
    missing = ("distrun: HANG (kind 1, idle): ranks 2, 3 have not entered collective #7 "
               "(ALLREDUCE [1024], process group 0) that ranks 0, 1 wait in for 300 s; rank 2 "
               "is busy in python")
    assert verdict(tmp_path, [missing])[2] == 2


def test_nccl_lines_after_a_grep_file_prefix_are_records_not_wraps() -> None:
    # `grep NCCL LOG1.*.txt` prefixes each file's name; lines of one form and one length
    # looked like a page wrapped at that width
    from distrun.diagnose.normalize import unwrap
    lines = [f"LOG1.{r}.txt:gpu-a:3261{r}:3261{r} [{r}] NCCL INFO Broadcast: opCount 0 sendbuff "
             f"0x7f3bfe7f540{r} recvbuff 0x7f3bfe7f540{r} count 53 datatype 4 op 0 root 0 comm "
             f"0x7f3bf405a26{r} [nranks=8] stream 0x55d5ffb7311{r}" for r in range(6)]
    assert unwrap("\n".join(lines)) == "\n".join(lines)


# torch/csrc/cuda/Module.cpp THCudaCheck (torch < 1.5) prints the runtime's error 35, which a
# host without any NVIDIA driver gets too
DRIVER_35 = ("RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for "
             "CUDA runtime version at /pytorch/torch/csrc/cuda/Module.cpp:34")


def test_no_driver_at_all_near_error_35_is_cuda_unavailable_at_low_confidence(
        tmp_path: Path) -> None:
    # the error first, then the user's check (without the refinement the earlier weak
    # wording, the driver mismatch, wins)
    lines = ["$ python train.py --gpu_ids 0", DRIVER_35, "$ nvidia-smi",
             "bash: nvidia-smi: command not found"]
    assert verdict(tmp_path, lines) == ("cuda-unavailable", "low", None)


def test_error_35_alone_stays_the_driver_mismatch(tmp_path: Path) -> None:
    assert verdict(tmp_path, [DRIVER_35]) == ("nccl-cuda-library-mismatch", "low", None)


def test_a_weak_wording_never_refines_a_strong_cause(tmp_path: Path) -> None:
    # cuda-unavailable's weak "torch.cuda.is_available(): False" near a strong invalid ordinal
    lines = ["torch.cuda.is_available(): False",
             "RuntimeError: CUDA error: invalid device ordinal"]
    assert verdict(tmp_path, lines) == verdict(tmp_path, lines[1:])
    assert verdict(tmp_path, lines)[0] == "cuda-invalid-device-ordinal"


def test_weak_wordings_of_two_rules_that_refine_each_other_keep_the_earliest() -> None:
    # cuda-unavailable and cuda-invalid-device-ordinal refine each other (rules.toml)
    from distrun.diagnose.engine import refine
    from distrun.diagnose.hit import Hit
    rules = default_rules()
    hits = [Hit("cuda-unavailable", None, None, "a.log", 1, "x", strong=False),
            Hit("cuda-invalid-device-ordinal", None, None, "a.log", 3, "y", strong=False)]
    assert {"cuda-unavailable"} <= set(rules.by_id("cuda-invalid-device-ordinal").refines)
    assert {"cuda-invalid-device-ordinal"} <= set(rules.by_id("cuda-unavailable").refines)
    assert [h.rule_id for h in refine(hits, rules)] == [h.rule_id for h in hits]


def test_a_wrap_that_leaves_the_summary_on_its_second_piece_still_names_the_kill(
        tmp_path: Path) -> None:
    # torchelastic's failure line, wrapped by a page at 80 columns: the second piece alone
    # reads as the summary (a consequence); joined, it reports the SIGKILL that caused it
    wrapped = ["[rank3]: ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode:",
               "-9) local_rank: 0 (pid: 5343) of binary: /usr/bin/python3"]
    assert verdict(tmp_path, wrapped) == ("host-oom-or-killed", "medium", 3)
    # a cause named by a piece alone is kept: the next line's summary is no part of it
    cause = ["[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
             "[rank3]: failed (exitcode: 1) local_rank: 3 (pid: 5343) of binary: python3"]
    assert verdict(tmp_path, cause)[0] == "cuda-out-of-memory"


def test_torch_npu_s_error_header_names_the_rank_of_the_cann_message_under_it(
        tmp_path: Path) -> None:
    # torch_npu prints "(PID:.., Device:.., RankID:..)" on a header; CANN's message follows
    lines = ["[ERROR] 2024-08-28-16:15:00 (PID:15597, Device:2, RankID:5) ERR00100 PTA call "
             "acl api failed",
             "EL0004: 2024-08-28-16:15:00.358.141 Failed to allocate memory.",
             "        Possible Cause: Available memory is insufficient.",
             "        rtFftsPlusTaskLaunch execute failed, reason=[driver error:out of memory]"]
    assert verdict(tmp_path, lines) == ("cuda-out-of-memory", "high", 5)
    # a process that is no rank prints RankID:-1: no rank then
    alone = [lines[0].replace("RankID:5", "RankID:-1"), *lines[1:]]
    assert verdict(tmp_path, alone) == ("cuda-out-of-memory", "high", None)
