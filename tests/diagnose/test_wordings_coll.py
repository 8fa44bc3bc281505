"""Wordings of the collective, teardown and launcher rules, from the code that prints them.

Each log is short and built around the real message; the comment names where the
message comes from. Assertions are what the user sees: the rule, how sure, the rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _verdict

from distrun.diagnose import diagnose

# (log text, rule id, confidence, rank or None)
CASES = {
    # torch c10d ProcessGroupWrapper.cpp (TORCH_DISTRIBUTED_DEBUG=DETAIL), torch 2.x
    "detail-fingerprint": (
        "[rank1]: Traceback (most recent call last):\n"
        "[rank1]:   File \"train.py\", line 40, in <module>\n"
        "[rank1]:     dist.all_reduce(t)\n"
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running "
        "collective: CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE, TensorShape=[4], "
        "TensorDtypes=Float), but Rank 0 is running collective: CollectiveFingerPrint("
        "SequenceNumber=3, OpType=ALLREDUCE, TensorShape=[3], TensorDtypes=Float).\n",
        "collective-mismatch", "high", 1),
    # gloo transport/tcp/pair.cc as bundled with torch 2.13 (reworded assert)
    "gloo-received-size": (
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:538] Received data "
        "size doesn't match expected size. Is there a distributed collective mismatch in your code?\n",
        "collective-mismatch", "high", 0),
    # torch/distributed/flight_recorder/components/builder.py (fr_trace analyser)
    "flight-recorder-cap": (
        "Collective sequence number: 12 has errors\n"
        "Too many mismatches for process_group 0: default_pg aborting\n",
        "collective-mismatch", "high", None),
    # torch/distributed/flight_recorder/components/types.py, all_gather size check
    "flight-recorder-numel": (
        "Found input numel '4096 * pg size 8' does not match output numel '30720'\n",
        "collective-mismatch", "high", None),
    # horovod/common/controller.cc (newer wording)
    "horovod-allgather": (
        "tensorflow.python.framework.errors_impl.FailedPreconditionError: "
        "Mismatched allgather tensor shapes: rank 2 vs 3\n",
        "collective-mismatch", "high", None),
    # horovod/common/stall_inspector.cc: a stall only suggests a mismatch
    "horovod-stall": (
        "[2021-02-02 21:19:07: W horovod/common/stall_inspector.cc:105] One or more tensors were "
        "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
        "remainder of ranks for more than 60 seconds. This may indicate that different ranks are "
        "trying to submit different tensors or that only subset of ranks is submitting tensors, "
        "which will cause deadlock.\n",
        "collective-mismatch", "low", None),
    # NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL per-collective lines (NCCL 2.x), pasted
    # from several per-rank files onto lines a terminal rejoined: one process's first
    # broadcast differs in count and datatype.
    "nccl-coll-lines-joined": (
        " ".join(
            f"LOG.{r}.txt:node1:{100 + r}:{100 + r} [{r}] NCCL INFO Broadcast: opCount 0 "
            f"sendbuff 0x7f0 recvbuff 0x7f0 count {25503912 if r == 0 else 53} datatype "
            f"{6 if r == 0 else 4} op 0 root 0 comm 0x7f1 [nranks=4] stream 0x55"
            for r in range(4)) + "\n",
        "collective-mismatch", "medium", None),
    # gloo transport/tcp/pair.cc (torch 2.13 bundle): the timeout closes the pair
    "gloo-pair-timeout": (
        "[rank2]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        "Application timeout caused pair closure\n",
        "collective-timeout", "medium", 2),
    # ProcessGroupNCCL.cpp (torch >= 2.5), also ProcessGroupCNCL / ProcessGroupECCL
    "global-timeout": (
        "[rank3]:[E1107 10:00:01 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 3] Received a global timeout from another rank and will start to dump the debug "
        "info. Last enqueued NCCL work: 57, last completed NCCL work: 56.\n",
        "collective-timeout", "medium", 3),
    # ProcessGroupNCCL.cpp (torch 2.1-2.3)
    "timeout-at-work": (
        "[E ProcessGroupNCCL.cpp:475] [Rank 2] Timeout at NCCL work: 57, last enqueued NCCL "
        "work: 57, last completed NCCL work: 56.\n",
        "collective-timeout", "medium", 2),
    # TensorFlow collective ops with timeout_seconds (MultiWorkerMirroredStrategy): a worker
    # never joined, or the collective did not finish in time
    "tf-collective-timed-out": (
        "tensorflow.python.framework.errors_impl.DeadlineExceededError: Collective has timed "
        "out during execution.\n",
        "collective-timeout", "medium", None),
    "tf-collective-waiting-for-workers": (
        "tensorflow.python.framework.errors_impl.DeadlineExceededError: Collective has timed "
        "out waiting for other workers.\n",
        "collective-timeout", "medium", None),
    # torch/distributed/flight_recorder/components/utils.py: a missing rank
    "flight-recorder-missing": (
        "Not all ranks joining collective, sequence number: 12\n",
        "collective-timeout", "medium", None),
    # ProcessGroupNCCL heartbeat monitor (torch 2.3+): the watchdog thread itself hung (a CUDA
    # or NCCL call that never returned), mid-run more often than at exit; alone only a hint.
    "heartbeat-watchdog-hang": (
        "[rank2]:[F205 18:19:06 ProcessGroupNCCL.cpp:1614] [PG ID 17 PG GUID 137 Rank 2] "
        "Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL "
        "watchdog hang.\n"
        "W0205 18:19:08.782000 4021 torch/distributed/elastic/multiprocessing/api.py:900] "
        "Sending process 4086 closing signal SIGTERM\n",
        "collective-timeout", "low", 2),
    # CUDA driver API CUDA_ERROR_DEINITIALIZED (4): "the CUDA driver is in the process of
    # shutting down"; capped at medium by the rule
    "cuda-deinitialized": (
        "training finished\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: CUDA_ERROR_DEINITIALIZED\n",
        "exit-time-abort", "medium", None),
    # Kubernetes graceful node shutdown (kubelet nodeshutdown manager)
    "k8s-node-shutdown": (
        "Status: Failed\nReason: Terminated\n"
        "Message: Pod was terminated in response to imminent node shutdown.\n",
        "stopped-externally", "high", None),
    # Kubernetes Job controller, reason DeadlineExceeded (activeDeadlineSeconds)
    "k8s-deadline": (
        "Warning  DeadlineExceeded  job-controller  Job was active longer than specified "
        "deadline\n",
        "stopped-externally", "high", None),
    # torch/distributed/elastic/multiprocessing/api.py SignalException, Ctrl-C (SIGINT)
    "elastic-sigint": (
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4021 got "
        "signal: 2\n",
        "stopped-externally", "high", None),
    # Kubernetes kubelet eviction (pod status)
    "k8s-evicted": (
        "Status:  Failed\nReason:  Evicted\n"
        "Message: The node was low on resource: ephemeral-storage.\n",
        "stopped-externally", "low", None),
    # c10d TCPStore (torch 2.x Utils.hpp)
    "tcpstore-send-0": (
        "[rank1]: torch.distributed.DistNetworkError: Failed to send, sent 0 bytes. Connection "
        "was likely closed. Did the remote server shutdown or crash?\n",
        "peer-connection-closed", "medium", 1),
    # UCX ucs_status_string(UCS_ERR_CONNECTION_RESET)
    "ucx-reset": (
        "[1700000000.1 ] ucp_worker.c:1783 UCX  ERROR ep 0x7f: error 'Connection reset by "
        "remote peer' will not be handled\n",
        "peer-connection-closed", "medium", None),
    # gloo transport/tcp/pair.cc (torch 2.13 bundle): the hint it appends to a read error
    "gloo-remote-crash": (
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Read error "
        "[10.0.0.2]:48213. This is typically caused by a remote worker crashing. Check the "
        "logs of the remote worker before reporting an error.\n",
        "peer-connection-closed", "medium", 0),
    # horovod/common/operations.cc SHUT_DOWN_ERROR
    "horovod-shut-down": (
        "horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was "
        "caused by an exception on one of the ranks or an attempt to allreduce, allgather or "
        "broadcast a tensor after one of the ranks finished execution.\n",
        "peer-connection-closed", "medium", None),
    # torch/distributed/fsdp/_exec_order_utils.py (TORCH_DISTRIBUTED_DEBUG=DETAIL)
    "fsdp-forward-order": (
        "[rank1]: RuntimeError: Forward order differs across ranks: rank 0 is all-gathering 1 "
        "parameters while rank 1 is all-gathering 2 parameters\n",
        "collective-mismatch", "high", 1),
    # torch/distributed/tensor/_collective_utils.py (DTensor.from_local run_check)
    "dtensor-metadata": (
        "[rank0]: ValueError: Inconsistent tensor metadata (including shape and stride) across "
        "ranks.\n",
        "collective-mismatch", "high", 0),
    # torch/distributed/_shard/sharded_tensor/utils.py
    "sharded-tensor-property": (
        "ValueError: ShardedTensor dtype property does not match from different ranks! Found "
        "dtype=torch.float32 on rank:0, and dtype=torch.float16 on rank:1.\n",
        "collective-mismatch", "high", None),
    # ProcessGroupNCCL.cpp WorkNCCL::checkTimeout, the C++ frame line of the timeout
    "check-timeout-frame": (
        "[rank3]: Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:565 (most recent call first):\n",
        "collective-timeout", "medium", 3),
    # torch CudaIPCTypes.cpp: a producer exiting while consumers hold its CUDA tensors
    "cuda-ipc-producer-exit": (
        "[W CudaIPCTypes.cpp:16] Producer process has been terminated before all shared CUDA "
        "tensors released. See Note [Sharing CUDA tensors]\n",
        "exit-time-abort", "low", None),
    # lightning_fabric/strategies/launchers/subprocess_script.py (_ChildProcessObserver),
    # Lightning 2.x: the prefix names the failed child's rank
    "lightning-child-observer": (
        "[rank: 2] Child process with PID 13117 terminated with code -6. Forcefully terminating "
        "all other processes to avoid zombies \U0001f9df\n",
        "elastic-summary-no-root-cause", "medium", 2),
    # Slurm srun when the step is terminated from outside
    "srun-force-terminated": (
        "srun: Force Terminated StepId=123456.0\n",
        "stopped-externally", "low", None),
    # ProcessGroupNCCL.cpp broadcastDumpSignal (torch 2.4+): this rank's watchdog fired
    "first-pg-dump": (
        "[rank1]:[E810 03:04:11.063 ProcessGroupNCCL.cpp:2573] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 1] First PG on this rank to signal dumping.\n",
        "collective-timeout", "medium", 1),
    # c10d Utils.hpp (torch 2.x TCPStore client)
    "tcpstore-send-bytes": (
        "[rank2]: torch.distributed.DistNetworkError: sendBytes failed on SocketImpl(fd=42, "
        "addr=[node2]:51200, remote=[node1]:29500): Connection timed out\n",
        "peer-connection-closed", "medium", 2),
    # torch 1.9 torchelastic summary: Root Cause first, the old "key: value" layout
    "elastic-summary-1.9": (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "***************************************\n"
        "            train.py FAILED\n"
        "=======================================\n"
        "Root Cause:\n[0]:\n  time: 2021-09-10_10:10:10\n  rank: 1 (local_rank: 1)\n"
        "  exitcode: 1 (pid: 123)\n  error_file: <N/A>\n"
        "  msg: \"Process failed with exitcode 1\"\n"
        "=======================================\n"
        "Other Failures:\n  <NO_OTHER_FAILURES>\n",
        "elastic-summary-no-root-cause", "medium", 1),
    # MPICH errnames.txt (**truncate): an MPI collective whose ranks passed different counts
    "mpich-truncated": (
        "Abort(469312910) on node 0 (rank 0 in comm 0): Fatal error in internal_Allreduce_c: "
        "Message truncated, error stack:\n"
        "MPIDIG_recv_type_init(74): Message from rank 1 and tag 14 truncated; 4 bytes received "
        "but buffer size is 8\n",
        "collective-mismatch", "high", None),
    # NCCL src/transport/net_socket.cc (2.19+)
    "nccl-socket-truncated": (
        "node1:100:200 [0] NCCL WARN NET/Socket : peer 10.0.0.2<40312> message truncated : "
        "receiving 262144 bytes instead of 65536. If you believe your socket network is in a "
        "healthy state, there may be a mismatch in collective sizes or environment settings "
        "(e.g. NCCL_PROTO, NCCL_ALGO) between ranks\n",
        "collective-mismatch", "high", None),
    # ProcessGroupECCL (Enflame GCU, torch_gcu), a port of ProcessGroupNCCL's watchdog
    "eccl-some-failed": (
        "[rank1]:[E ProcessGroupECCL.cpp:240] [Rank 1] Some ECCL operations have failed or "
        "timed out. Due to the asynchronous nature of GCU kernels, subsequent GCU operations "
        "might run on corrupted/incomplete data.\n",
        "collective-timeout", "medium", 1),
    # ProcessGroupMCCL (Moore Threads MUSA, torch_musa) NCCLUtils port
    "mccl-aborted": (
        "RuntimeError: MCCL communicator was aborted on rank 3.\n",
        "collective-timeout", "medium", 3),
    # distrun's own hang watcher (monitor/hangdetect.py announce, cli/launch.py summary)
    "distrun-hang-idle": (
        "distrun: HANG (kind 1, idle): rank 2 has not entered collective #57 (allreduce [[4]], "
        "process group 0) that ranks 0, 1, 3 wait in for 12 s\n"
        "distrun: stopping the job: no progress for 300 s (--stall-timeout 300)\n"
        "distrun: job stopped after a stall (exit status 1): rank 2 stalled; run directory: "
        "runs/x\n",
        "distrun-stall", "high", 2),
    # a kind-3 hang is distrun's own proof that the ranks entered different collectives
    "distrun-hang-mismatch": (
        "distrun: HANG (kind 3, mismatch): collective mismatch at collective #57 (allreduce "
        "[[4]], process group 0): rank 1: allreduce [[3]]: rank 1 entered a different op or "
        "shape than the others; it can never complete\n"
        "distrun: stopping the job: waiting cannot succeed\n",
        "collective-mismatch", "high", 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wording(tmp_path: Path, name: str) -> None:
    text, rule, confidence, rank = CASES[name]
    assert _verdict(tmp_path, text) == (rule, confidence, rank)


@pytest.mark.parametrize(("text", "not_rule"), [
    # a checkpoint whose shapes differ is not a collective of different shapes
    ("RuntimeError: Error(s) in loading state_dict for Net:\n\tsize mismatch for fc.weight: "
     "copying a param with shape torch.Size([10, 4]) from checkpoint, the shape in current "
     "model is torch.Size([10, 3]).\n", "collective-mismatch"),
    # the rendezvous store timing out is not a collective timeout (torch c10d socket.cpp)
    ("torch.distributed.DistNetworkError: The client socket has timed out after 900s while "
     "trying to connect to (10.0.0.1, 29500).\n", "collective-timeout"),
    # a SIGKILL is how the OOM killer stops a process, not a stop from outside
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 7 got signal: 9\n",
     "stopped-externally"),
    # a crash during training is not an abort at exit
    ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call "
     "first):\n  File \"train.py\", line 12 in step\n", "exit-time-abort"),
    # an InfiniBand completion error is the network, not a peer that went away (NCCL net_ib.cc)
    ("node1:100:200 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53280> with error "
     "12, opcode 0, len 0, vendor err 129\n", "peer-connection-closed"),
])
def test_neighbour_not_taken(tmp_path: Path, text: str, not_rule: str) -> None:
    assert _verdict(tmp_path, text)[0] != not_rule


def test_heartbeat_hang_after_stuck_watchdog_is_a_timeout(tmp_path: Path) -> None:
    # ProcessGroupNCCL.cpp (torch 2.3+) prints "watchdog got stuck" before terminating:
    # then the weak exit-time wording only describes the teardown.
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! "
        "Process will be terminated after dumping debug info.\n"
        "[rank0]:[E ProcessGroupNCCL.cpp:1153] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got "
        "stuck for 480 seconds without making progress in monitoring enqueued collectives.\n"
        "[rank0]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 0] Terminating the process after "
        "attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.\n")
    assert _verdict(tmp_path, text) == ("collective-timeout", "medium", 0)


def test_cause_after_consequence_wins(tmp_path: Path) -> None:
    # The timeout on rank 0 comes first in the file; rank 1's gloo mismatch explains it.
    text = (
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        "Application timeout caused pair closure\n"
        "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:538] Received "
        "data size doesn't match expected size. Is there a distributed collective mismatch in "
        "your code?\n")
    log = tmp_path / "job.log"
    log.write_text(text)
    result = diagnose([log])
    assert (result.causes[0].rule.id, result.causes[0].rank) == ("collective-mismatch", 1)
    assert [(c.rule_id, c.rank) for c in result.causes[0].consequences] == [
        ("collective-timeout", 0)]


def test_summary_rank_names_the_unknown_error(tmp_path: Path) -> None:
    # torch 1.13 torchelastic: an error no rule knows, then the launcher's failure line
    # naming local_rank 0: no known cause, and the unknown error is rank 0's.
    text = (
        "Exception: expected value at line 1 column 1\n"
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
        "(pid: 24024) of binary: /opt/conda/bin/python\n")
    assert _verdict(tmp_path, text) == (None, None, 0)


def test_summary_only_names_the_root_cause_rank(tmp_path: Path) -> None:
    # torch 2.x torchelastic ChildFailedError summary: other failures first, root cause last.
    text = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "[1]:\n  time      : 2024-05-01_10:00:05\n  host      : gpu-a\n"
        "  rank      : 1 (local_rank: 1)\n  exitcode  : -15 (pid: 101)\n"
        "  error_file: <N/A>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n  time      : 2024-05-01_10:00:04\n  host      : gpu-a\n"
        "  rank      : 3 (local_rank: 3)\n  exitcode  : -6 (pid: 103)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 6 (SIGABRT) received by PID 103\n"
        "============================================================\n")
    assert _verdict(tmp_path, text) == ("elastic-summary-no-root-cause", "medium", 3)


def _coll(pid: int, op: str, count: int, comm: str, nranks: int = 2) -> str:
    # NCCL src/enqueue.cc with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL (NCCL 2.x)
    return (f"node1:{pid}:{pid} [0] NCCL INFO {op}: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 "
            f"count {count} datatype 7 op 0 root 0 comm {comm} [nranks={nranks}] stream 0x56\n")


def test_nccl_lines_of_two_groups_of_one_size_are_not_compared(tmp_path: Path) -> None:
    # Each process is in a tensor-parallel and a data-parallel communicator of two ranks:
    # their first collectives are unrelated, so differing lines prove nothing.
    text = "".join(
        _coll(pid, "AllReduce", 4096, f"0x{pid}a") + _coll(pid, "AllGather", 128, f"0x{pid}b")
        for pid in (10, 11))
    text += _coll(12, "AllGather", 128, "0x12b") + _coll(13, "Broadcast", 53, "0x13a")
    assert _verdict(tmp_path, text)[0] is None


def test_nccl_point_to_point_lines_are_not_compared(tmp_path: Path) -> None:
    # pipeline stages send and receive different tensors at the same opCount
    text = _coll(10, "Send", 4096, "0x1") + _coll(11, "Recv", 4096, "0x2") \
        + _coll(12, "Send", 128, "0x3")
    assert _verdict(tmp_path, text)[0] is None


def test_nccl_lines_of_one_group_that_disagree_are_a_mismatch(tmp_path: Path) -> None:
    text = "".join(_coll(10 + r, "AllReduce", 4096, f"0x{r}", 4) for r in range(3))
    text += _coll(13, "AllReduce", 2048, "0x3", 4)
    log = tmp_path / "job.log"
    log.write_text(text)
    root = diagnose([log]).causes[0]
    assert (root.rule.id, root.confidence) == ("collective-mismatch", "medium")
    assert "node1:13:13" in root.evidence[0].text


def test_only_weak_consequences_stay_low(tmp_path: Path) -> None:
    # c10d TCPStore wait (torch 2.x): "wait timeout" is shared by store waits of every
    # kind, so alone it is a low-confidence hint, never raised to medium.
    text = ("torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: "
            "/default_pg/0//cuda//0\n")
    log = tmp_path / "job.log"
    log.write_text(text)
    root = diagnose([log]).causes[0]
    assert (root.rule.id, root.confidence) == ("collective-timeout", "low")
    assert root.note.startswith("only consequences in these logs")


def test_only_consequences_point_at_the_rank_that_did_not_time_out(tmp_path: Path) -> None:
    # ProcessGroupNCCL.cpp (torch 2.2+) on ranks 0, 1 and 3; rank 2 never reports
    line = ("[rank{r}]:[E ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1024, "
            "NumelOut=1024, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n")
    log = tmp_path / "job.log"
    log.write_text("".join(line.format(r=r) for r in (0, 1, 3)))
    root = diagnose([log]).causes[0]
    assert (root.rule.id, root.confidence, root.rank) == ("collective-timeout", "medium", 2)
    assert "look in the log of rank 2 (it did not report the timeout" in root.note


@pytest.mark.parametrize(("waiting", "rank", "note"), [
    ((1, 2, 3), 0, "look in the log of rank 0 ("),  # rank 0 busy (tokenising, evaluating)
    ((0, 3), 0, "look in the logs of ranks 1, 2 ("),  # two missing: no single rank named
    ((3,), 3, "the logs of the ranks other than 3"),  # one waiter pasted: nothing to infer
    ((0, 1, 2), 0, "the logs of the ranks other than 0, 1, 2"),  # the missing rank is above
])
def test_a_pasted_timeout_names_the_rank_the_others_waited_for(
        tmp_path: Path, waiting: tuple[int, ...], rank: int, note: str) -> None:
    line = ("[rank{r}]:[E ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1024, "
            "NumelOut=1024, Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n")
    log = tmp_path / "job.log"
    log.write_text("".join(line.format(r=r) for r in waiting))
    root = diagnose([log]).causes[0]
    assert (root.rule.id, root.rank) == ("collective-timeout", rank)
    assert note in root.note


def test_summary_flattened_onto_one_line_still_names_the_root_cause_rank(tmp_path: Path) -> None:
    # torch 2.x ChildFailedError summary pasted without its newlines: the other failure
    # (rank 0) comes first, the Root Cause block (rank 1) last; rank 0's prefix before it
    # carries over to every piece of the flattened line.
    text = " ".join([
        "[rank0]: Traceback (most recent call last):",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "============================================================", "train.py FAILED",
        "------------------------------------------------------------", "Failures:",
        "[1]:", "time      : 2026-11-22_05:34:16", "host      : localhost",
        "rank      : 0 (local_rank: 0)", "exitcode  : 1 (pid: 12633)", "error_file: <N/A>",
        "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):", "[0]:", "time      : 2026-11-22_05:34:16",
        "host      : localhost", "rank      : 1 (local_rank: 1)", "exitcode  : 1 (pid: 12634)",
        "error_file: <N/A>",
        "traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================"]) + "\n"
    assert _verdict(tmp_path, text) == ("elastic-summary-no-root-cause", "medium", 1)


@pytest.mark.parametrize("launcher", ["mpirun", "mpiexec", "prterun"])
def test_open_mpi_names_the_first_process_to_fail(tmp_path: Path, launcher: str) -> None:
    # Open MPI (orte/prrte help-errmgr-base): the rank after the job id is the first failure
    name = "[prterun-node1-147515@1,2]" if launcher == "prterun" else "[[2403,1],2]"
    text = (
        "--------------------------------------------------------------------------\n"
        f"{launcher} detected that one or more processes exited with non-zero status, thus "
        "causing\nthe job to be terminated. The first process to do so was:\n\n"
        f"  Process name: {name}\n  Exit code:    3\n"
        "--------------------------------------------------------------------------\n")
    assert _verdict(tmp_path, text) == ("elastic-summary-no-root-cause", "medium", 2)


def test_nccl_lines_that_disagree_beat_the_timeout_that_follows(tmp_path: Path) -> None:
    # NCCL's COLL lines show process 13 broadcasting where the others all-reduce; the
    # watchdog timeouts (ProcessGroupNCCL.cpp, torch 2.2+) that follow are its result.
    text = "".join(_coll(10 + r, "AllReduce", 4096, f"0x{r}", 4) for r in range(3))
    text += _coll(13, "Broadcast", 53, "0x3", 4)
    text += "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
        "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n" for r in range(3))
    log = tmp_path / "job.log"
    log.write_text(text)
    root = diagnose([log]).causes[0]
    assert (root.rule.id, root.confidence) == ("collective-mismatch", "medium")
    assert {c.rule_id for c in root.consequences} == {"collective-timeout"}
