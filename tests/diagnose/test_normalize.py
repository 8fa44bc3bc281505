"""Lines as people paste them: every launcher's rank prefix, timestamps, ANSI, pastes, wraps."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose, to_json
from distrun.diagnose.normalize import (
    MAX_LINE,
    Logical,
    clean,
    logical_lines,
    rank_in_text,
    strip_prefixes,
    structured,
    unwrap,
)
from distrun.diagnose.reading import open_log

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.mark.parametrize(("line", "rank", "node"), [
    (f"[rank3]: {OOM}", 3, None),  # torchrun >= 2.2
    (f"[default3]: {OOM}", 3, None),  # torchrun --tee / accelerate
    (f"[rank: 3] {OOM}", 3, None),  # Lightning
    (f"[RANK 3] {OOM}", 3, None),  # loggers that print the rank upper-case
    (f"[rank=3] {OOM}", 3, None),
    (f"[RANK:3] {OOM}", 3, None),
    (f"[1,3]<stderr>: {OOM}", 3, None),  # Open MPI --tag-output
    (f"[1,3]<stdout>:{OOM}", 3, None),
    (f"srun: error: node12: task 5: {OOM}", 5, "node12"),
    (f"node12: task 5: {OOM}", 5, "node12"),
    (f"5: {OOM}", 5, None),  # srun --label
    (f"[3]: {OOM}", 3, None),  # torchelastic --tee (older torch)
    (f"worker-1: [rank8]: {OOM}", 8, "worker-1"),  # pdsh (DeepSpeed multi-node)
    (f"2026-11-22T04:39:20.123456Z err [rank2]: {OOM}", 2, None),  # distrun's rank logs
    (f"[2024-03-02 10:11:12,345] [rank1]: {OOM}", 1, None),
    (f"\x1b[31m[rank6]:\x1b[0m {OOM}", 6, None),  # colour codes
    (f"0: [rank7]: {OOM}", 7, None),  # srun label around torchrun's prefix: innermost wins
    (f"(VllmWorker rank=3 pid=112081) ERROR 07-17 08:06:53 [multiproc_executor.py:487] {OOM}",
     3, None),  # vLLM workers and their logger
    (f"(TaskRunner pid=467613) {OOM}", None, None),  # Ray actors
    (f"[2]<stderr>:{OOM}", 2, None),  # horovodrun
    (f"[pod/trainer-worker-1/pytorch] {OOM}", None, "trainer-worker-1"),  # kubectl logs --prefix
    (f"E1122 05:34:06.394000 12497 torch/distributed/run.py:1002] {OOM}", None, None),  # glog
    (f"> > {OOM}", None, None),  # quoted in a Markdown reply
    (f"(pid=1521961) {OOM}", None, None),  # older Ray
    (f"│ {OOM}   │", None, None),  # rich traceback box
    (f"- root - ERROR - {OOM}", None, None),  # Python logging's default format (stamp peeled)
    (f"__main__ - ERROR - {OOM}", None, None),
])
def test_prefix_is_stripped_and_names_the_rank(line: str, rank: int, node: str | None) -> None:
    logical = logical_lines(line)
    assert [(x.text, x.rank, x.node) for x in logical] == [(OOM, rank, node)]


@pytest.mark.parametrize(("text", "rank"), [
    ("[Rank 3] Watchdog caught collective operation timeout", 3),
    ("[PG 0 (default_pg) Rank 5] Watchdog caught collective operation timeout", 5),
    ("  rank      : 3 (local_rank: 3)", 3),
    ("rank: 3 (local_rank: 3)", 3),
    ("failed (exitcode: 1) local_rank: 3 (pid: 4242) of binary: /usr/bin/python", 3),
    ("Rank 3 is running collective: CollectiveFingerPrint(OpType=ALLREDUCE", 3),
    ("jax.distributed.initialize(coordinator_address='h:1234', num_processes=4, process_id=3)", 3),
    ("mpirun noticed that process rank 3 with PID 4242 on node n1 exited on signal 9 (Killed).", 3),
    ("MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD", 2),
    ("Process 1 exit with status code 1.", 1),  # horovodrun
    ("RANK 3: torch.OutOfMemoryError: CUDA out of memory", 3),
    ("worker rank=5 failed: torch.OutOfMemoryError", 5),
    ("RuntimeError: [1]: params[0] in this process with sizes [10, 5] appears not to match sizes "
     "of the same param in process 0.", 1),
    ("torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving "
     "ncclUniqueId from [0] via c10d key-value store by key '0'", 3),
])
def test_rank_named_in_the_message(text: str, rank: int) -> None:
    assert rank_in_text(text) == rank


@pytest.mark.parametrize("text", [
    "NNODES=2 RANK=1 MASTER_ADDR=192.168.0.1 MASTER_PORT=29500 torchrun train.py "
    "[W socket.cpp:464] [c10d] The server socket cannot be initialized on [::]:29500",
    "FORCE_TORCHRUN=1 RANK=0 llamafactory-cli train: RuntimeError: CUDA out of memory",
    "$ export RANK=3; python train.py RuntimeError: CUDA error: invalid device ordinal",
])
def test_a_shell_environment_on_the_line_names_no_rank(text: str) -> None:
    """A one-line paste of the launch command and its error: RANK there is how the command was
    started (LlamaFactory's node rank, or ignored by torchrun), not the process that failed."""
    assert rank_in_text(text) is None
    assert rank_in_text(text + " [Rank 2] Watchdog caught collective operation timeout") == 2


def test_jax_process_and_task_ids_only_on_jax_lines() -> None:
    assert rank_in_text("task /job:jax_worker/replica:0/task:3 failed", jax=True) == 3
    assert rank_in_text("Terminating process 3 because of errors", jax=True) == 3
    assert rank_in_text("Sending process 4242 closing signal SIGTERM") is None


def test_one_line_paste_is_split_into_lines() -> None:
    paste = "Traceback (most recent call last):\\n  File \"t.py\", line 3\\n" + OOM + "\\n"
    texts = [x.text for x in logical_lines(paste)]
    assert texts[-1] == OOM and len(texts) == 3


def test_strip_prefixes_leaves_plain_lines_alone() -> None:
    assert strip_prefixes("step 10 loss 2.1: fine").text == "step 10 loss 2.1: fine"
    assert strip_prefixes("RuntimeError: x").rank is None


def test_long_line_is_capped() -> None:
    assert len(logical_lines("x" * (MAX_LINE * 3))[0].text) == MAX_LINE


def diagnosed(tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "pasted.log"
    log.write_text(text)
    causes = to_json(diagnose([log]))["causes"]
    assert causes, "no cause found"
    return dict(causes[0])


@pytest.mark.parametrize(("text", "rule", "rank"), [
    (f"[default3]: {OOM}\n", "cuda-out-of-memory", 3),
    ("srun: error: node12: task 5: RuntimeError: CUDA error: invalid device ordinal\n",
     "cuda-invalid-device-ordinal", 5),
    ("[1,2]<stderr>:RuntimeError: Default process group has not been initialized\n",
     "default-pg-not-initialized", 2),
    ("E0929 17:42:48 client.cc:1] process_id=1 DEADLINE_EXCEEDED: Barrier timed out\n",
     "jax-coordination", 1),
])
def test_prefixed_logs_name_cause_and_rank(tmp_path: Path, text: str, rule: str, rank: int) -> None:
    cause = diagnosed(tmp_path, text)
    assert (cause["id"], cause["rank"]) == (rule, rank)


def test_message_wrapped_by_the_terminal_is_joined(tmp_path: Path) -> None:
    cause = diagnosed(tmp_path, "[rank1]: torch.OutOfMemoryError: CUDA out of\n"
                                "[rank1]: memory. Tried to allocate 20.00 MiB\n")
    assert (cause["id"], cause["rank"]) == ("cuda-out-of-memory", 1)


def test_literal_newline_paste_finds_the_cause_and_its_line(tmp_path: Path) -> None:
    paste = ("step 1\n" + "Traceback (most recent call last):\\n  File \"x.py\", line 1\\n"
             "[rank4]: RuntimeError: CUDA error: invalid device ordinal\\n\n")
    cause = diagnosed(tmp_path, paste)
    assert (cause["id"], cause["rank"]) == ("cuda-invalid-device-ordinal", 4)
    assert cause["evidence"][0]["line"] == 2  # type: ignore[index]


def test_ansi_inside_the_message_is_ignored(tmp_path: Path) -> None:
    cause = diagnosed(tmp_path, "\x1b[1;31mRuntimeError\x1b[0m: \x1b[33mCUDA out of memory\x1b[0m\n")
    assert cause["id"] == "cuda-out-of-memory"


def test_message_wrapped_over_three_lines_and_mid_word_is_found(tmp_path: Path) -> None:
    # a terminal 40 columns wide cuts torch's OOM message mid-word, over three lines
    log = tmp_path / "paste.log"
    log.write_text("[rank2]: torch.OutOfMemoryError: CUDA ou\n"
                   "t of memory. Tried to allocate 2.00 GiB. \n"
                   "GPU 0 has a total capacity of 79 GiB\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("cuda-out-of-memory", 2)


def test_a_terminal_cut_through_a_progress_bars_padding_is_rejoined(tmp_path: Path) -> None:
    # tqdm pads its bar with blanks; a 40-column terminal cut it into a row of blanks only,
    # then the rest: a watchdog line printed on the bar's line, of rank 2 under rank 3's prefix
    bar = "[rank3]: tokenizing:   9%|###" + " " * 55 + "| 280/2969 [29:55<4:48:08]"
    watchdog = "[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation " \
               "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE) ran for 1800328 milliseconds"
    line = bar + watchdog
    cut = "\n".join(line[i : i + 40] for i in range(0, len(line), 40))
    assert "\n" + " " * 40 + "\n" in cut + "\n"  # one row is blanks only
    joined = [row for row in unwrap(cut + "\n").split("\n") if row]
    assert joined == [line]
    cause = diagnosed(tmp_path, cut + "\n")
    assert (cause["id"], cause["rank"]) == ("collective-timeout", 3)


def test_wrapped_error_line_joins_the_launcher_summary_it_starts(tmp_path: Path) -> None:
    # subprocess.CalledProcessError as DeepSpeed/accelerate print it, wrapped by the paste:
    # the first piece alone looks like an unknown error, the joined lines are the summary
    log = tmp_path / "paste.log"
    log.write_text("subprocess.CalledProcessError: Command '['/opt/conda/bin/python3', '-u',\n"
                   "'main.py', '--local_rank=1']' returned non-zero exit status 1.\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "elastic-summary-no-root-cause"


def test_html_character_references_are_decoded() -> None:
    # text copied from a web page's source keeps &#39; and &quot;
    assert logical_lines("KeyError: &#39;LOCAL_RANK&#39;")[0].text == "KeyError: 'LOCAL_RANK'"


def test_a_paste_that_lost_its_newlines_is_cut_where_records_start(tmp_path: Path) -> None:
    # one line: the elastic summary first, the rank's own error (the cause) after it
    noise = "step 1 loss 2.0 " * 20
    flat = (f"{noise}torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
            f"train.py FAILED {noise} [rank1]: Traceback (most recent call last): "
            f"File \"train.py\", line 3 [rank1]: {OOM}")
    assert len(flat) > 400
    log = tmp_path / "paste.log"
    log.write_text(flat + "\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("cuda-out-of-memory", 1)


WATCHDOG = ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 "
            "milliseconds before timing out.")
TRACE = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
         "    main()\n")


def test_a_terminals_cut_is_rejoined_and_line_numbers_kept() -> None:
    text = TRACE + f"[rank3]: {WATCHDOG}\n" + f"[rank3]: {OOM}\n"
    cut = "\n".join(line[i : i + 60] for line in text.split("\n")
                    for i in range(0, max(len(line), 1), 60))
    joined = unwrap(cut).split("\n")
    assert len(joined) == len(cut.split("\n"))
    assert f"[rank3]: {WATCHDOG}" in joined and f"[rank3]: {OOM}" in joined


def test_a_pages_wrap_is_rejoined_with_spaces() -> None:
    import textwrap
    text = "\n".join(textwrap.wrap(WATCHDOG, 70) + textwrap.wrap(OOM, 70))
    assert [line for line in unwrap(text).split("\n") if line] == [WATCHDOG, OOM]


def test_a_wrap_after_a_kept_space_joins_with_one_space(tmp_path: Path) -> None:
    # an 80-column paste whose wrap kept the space it broke at ("undefined " / "symbol: ..."),
    # then a progress bar's line (its '\r' and the blank before it dropped) and the next bar
    message = "[rank3]: 2024-05-01 12:00:00,123 - INFO - torch/lib/libtorch_cuda.so: " \
              "undefined symbol: ncclCommRegister"
    bar = "Epoch 1:  37%|###7      | 370/1000 [01:02<01:46,  5.91it/s, loss=2.31]"
    text = f"{message[:80]}\n{message[80:]}\n[rank5]: {bar}\r\n{bar}\n"
    assert message[:80].endswith("undefined ")
    assert message in unwrap(text).split("\n")
    cause = diagnosed(tmp_path, text)
    assert (cause["id"], cause["rank"]) == ("nccl-cuda-library-mismatch", 3)


@pytest.mark.parametrize("text", [
    TRACE + "RuntimeError: CUDA error: invalid device ordinal\n" * 4,  # repeated by 4 ranks
    TRACE + f"{OOM}\nCUDA kernel errors might be asynchronously reported\n",
    "```\n" + TRACE + "```\n",
    "short\nlines\n",
])
def test_a_log_that_is_not_wrapped_is_left_alone(text: str) -> None:
    assert unwrap(text) == text


def test_a_prefixed_line_cut_once_passes_its_prefix_on(tmp_path: Path) -> None:
    line = f"[1,3]<stderr>:2024-05-01 12:00:00,123 - INFO - {OOM}"
    log = tmp_path / "paste.log"
    log.write_text(line[:70] + "\n" + line[70:] + "\n")
    root = to_json(diagnose([log]))["causes"][0]
    assert (root["id"], root["rank"]) == ("cuda-out-of-memory", 3)


def test_open_log_rejoins_a_small_wrapped_log(tmp_path: Path) -> None:
    log = tmp_path / "wrapped.log"
    log.write_text("\n".join(WATCHDOG[i : i + 50] for i in range(0, len(WATCHDOG), 50)) + "\n")
    with open_log(log) as stream:
        assert stream.read().decode().split("\n")[0] == WATCHDOG


@pytest.mark.parametrize(("line", "text", "rank"), [
    (f"3:     {OOM}", OOM, 3),  # srun --label before an indented line
    ("2024-05-01 12:00:00,123 - ERROR - boom", "boom", None),  # asctime - levelname -
])
def test_more_prefixes(line: str, text: str, rank: int | None) -> None:
    assert [(x.text, x.rank) for x in logical_lines(line)] == [(text, rank)]


def test_a_short_line_holding_two_records_is_cut_between_them() -> None:
    line = "FileNotFoundError: [Errno 2] x.pickle ERROR:torch.distributed.elastic:failed (exitcode: 1)"
    assert [x.text for x in logical_lines(line)] == [
        "FileNotFoundError: [Errno 2] x.pickle",
        "ERROR:torch.distributed.elastic:failed (exitcode: 1)"]


def test_a_pastes_typography_is_the_programs_ascii_again(tmp_path: Path) -> None:
    # a forum's quotes, a web page's no-break space, a zero-width space, an input method's
    # full-width colon; the same length less the zero-width character
    assert clean("\u201cRuntimeError:\u00a0No\u200b such file \u2018x\u2019\u201d 报错\uff1a") == \
        '"RuntimeError: No such file \'x\'" 报错:'
    log = tmp_path / "forum.log"
    log.write_text("OSError: libcudart.so.11.0:\u00a0cannot open shared object file: No such "
                   "file or directory\n", encoding="utf-8")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "nccl-cuda-library-mismatch"


def test_a_json_log_record_is_read_as_its_message(tmp_path: Path) -> None:
    # Docker's json-file driver, journalctl -o json, Cloud Logging (text and JSON payloads)
    docker = '{"log":"[rank1]: torch.OutOfMemoryError: CUDA out of memory.\\n","stream":"stderr"}'
    assert logical_lines(docker) == [Logical("torch.OutOfMemoryError: CUDA out of memory.", 1)]
    journal = '{"MESSAGE": "Killed", "_HOSTNAME": "gpu-node-7", "PRIORITY": "3"}'
    assert [line.text for line in logical_lines(journal)] == ["Killed"]
    payload = ('{"jsonPayload": {"message": "Traceback (most recent call last):\\n  File '
               '\\"t.py\\"\\nRuntimeError: boom"}, "severity": "ERROR"}')
    assert [line.text for line in logical_lines(payload)] == [
        "Traceback (most recent call last):", 'File "t.py"', "RuntimeError: boom"]
    deep = '{"a": ' * 50_000 + "1" + "}" * 50_000
    for other in ('{"loss": 0.25, "step": 10}', "{'loss': 0.25}", '{"log": "cut', "{}", deep):
        assert structured(other) is None, other
    log = tmp_path / "container-json.log"
    log.write_text('{"log":"Epoch 1\\n","stream":"stdout","time":"2024-05-01T12:00:00Z"}\n'
                   '{"log":"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled '
                   'system error, NCCL version 2.14.3\\n","stream":"stderr","time":"2024-05-01'
                   'T12:00:01Z"}\n', encoding="utf-8")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "nccl-network"


def test_a_syslog_prefix_names_the_node() -> None:
    line = strip_prefixes("May  1 12:00:00 gpu-node-7 python3[41234]: [rank2]: Killed")
    assert (line.text, line.rank, line.node) == ("Killed", 2, "gpu-node-7")
