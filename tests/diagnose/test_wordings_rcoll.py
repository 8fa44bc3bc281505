"""Wordings of the collective, P2P, network and rendezvous rules added in session 8.

Each log is short and built around the real message; the comment names where the
message comes from. Assertions are what the user sees: the rule, how sure, the rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _verdict

# (log text, rule id, confidence, rank or None)
CASES = {
    # torch c10d socket.cpp (2.2+, the strings in libtorch_cpu of torch 2.13): a TCPStore
    # get/wait on a connected socket ran out (rank 0 busy preprocessing, the key unset)
    "store-wait-for-input": (
        "[rank1]:[W516 14:34:56.853490829 socket.cpp:464] [c10d] waitForInput: poll for socket "
        "SocketImpl(fd=79, addr=[node1]:41170, remote=[node0]:29500) returned 0, likely a "
        "timeout\n"
        "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket "
        "SocketImpl(fd=79, addr=[node1]:41170, remote=[node0]:29500) timed out after "
        "1800000ms\n",
        "collective-timeout", "medium", 1),
    # the same, with TCPStore.cpp doWait's DistStoreError in the traceback after it
    "store-wait-timeout-keys": (
        "[rank1]:[W516 14:34:56.854597329 socket.cpp:489] [c10d] waitForInput: socket "
        "SocketImpl(fd=79, addr=[node1]:41170, remote=[node0]:29500) timed out after "
        "1800000ms\n"
        "[rank1]: Traceback (most recent call last):\n"
        "[rank1]:   File \"train.py\", line 12, in <module>\n"
        "[rank1]:     dist.barrier()\n"
        "[rank1]: torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: "
        "/default_pg/0//cuda//0\n",
        "collective-timeout", "medium", 1),
    # TCPStore.cpp doWait alone (no socket warning): a shared wording, weak
    "store-wait-timeout-alone": (
        "torch.distributed.DistStoreError: wait timeout after 600000ms, keys: /default_pg/0//0\n",
        "collective-timeout", "low", None),
    # torch c10d Utils.hpp "Socket Timeout" (a store read), raised in a user barrier
    "socket-timeout-training": (
        "[rank3]: Traceback (most recent call last):\n"
        "[rank3]:   File \"train.py\", line 88, in <module>\n"
        "[rank3]:     dist.barrier()\n"
        "[rank3]:   File \"/opt/torch/distributed/distributed_c10d.py\", line 4159, in barrier\n"
        "[rank3]: torch.distributed.DistNetworkError: Socket Timeout\n",
        "collective-timeout", "medium", 3),
    # the same store read inside elastic's full-rank check (elastic/utils/distributed.py)
    "socket-timeout-rendezvous": (
        "Traceback (most recent call last):\n"
        "  File \"/opt/torch/distributed/elastic/utils/distributed.py\", line 95, in "
        "create_c10d_store\n"
        "    _check_full_rank(store, world_size, timeout=timeout)\n"
        "  File \"/opt/torch/distributed/elastic/utils/distributed.py\", line 120, in "
        "_check_full_rank\n"
        "    barrier(store, world_size, key_prefix=_TCP_STORE_INIT, barrier_timeout=timeout)\n"
        "torch.distributed.DistNetworkError: Socket Timeout\n"
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "TimeoutError: timed out waiting for all 2 members to join\n",
        "rendezvous-timeout", "medium", None),
    # ProcessGroupGloo.cpp monitoredBarrier (libtorch_cpu, torch 2.13)
    "gloo-monitored-barrier": (
        "[rank0]: RuntimeError: Rank 0 timed out in monitoredBarrier after 30000 ms.\n",
        "collective-timeout", "medium", 0),
    # torch/distributed/elastic/utils/store.py barrier(): an agent missing at the exit
    # barrier (weak: the full-rank check at start-up prints it too); the rank named is the
    # missing one
    "elastic-store-barrier": (
        "torch.distributed.DistStoreError: Timed out waiting on barrier on rank 2, for key "
        "prefix: torchelastic/agent/terminal_state (world_size=4, missing_ranks=[Rank 3], "
        "timeout=0:05:00)\n",
        "collective-timeout", "low", 3),
    # torch/distributed/pipelining/_utils.py (2.9+): stages disagree on a tensor's shape
    "pipelining-metadata": (
        "[rank1]: torch.distributed.pipelining._utils.PipeliningMetadataError: Stage 1: recv "
        "tensor 0: shape mismatch: torch.Size([4, 512]) vs torch.Size([2, 512])\n",
        "collective-mismatch", "high", 1),
    # gloo transport/tcp/pair.cc (GLOO_ERROR_MSG): a read from a peer timed out
    "gloo-read-timeout": (
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Read "
        "timeout [10.0.0.2]:41235\n",
        "collective-timeout", "medium", 0),
    # gloo transport/tcp/pair.cc: the peer's socket closed
    "gloo-socket-closed": (
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:201] Socket "
        "unexpectedly closed [10.0.0.2]:41235\n",
        "peer-connection-closed", "medium", 0),
    # MPICH / Intel MPI errnames (**collective_size_mismatch), MPIR_Bcast_binomial
    "mpich-size-mismatch": (
        "Fatal error in PMPI_Bcast: Other MPI error, error stack:\n"
        "PMPI_Bcast(1600)........: MPI_Bcast(buf=0x7ffd, count=1142, MPI_INT, root=0, "
        "MPI_COMM_WORLD) failed\n"
        "MPIR_Bcast_binomial(250): message sizes do not match across processes in the "
        "collective routine: Received 4352 but expected 4568\n",
        "collective-mismatch", "high", None),
    # Open MPI ompi/errhandler (MPI_ERRORS_ARE_FATAL) for an error inside a collective
    "ompi-err-in-status": (
        "*** An error occurred in MPI_Allreduce\n"
        "*** on communicator MPI_COMM_WORLD\n"
        "*** MPI_ERR_IN_STATUS: error code in status\n"
        "*** MPI_ERRORS_ARE_FATAL (your MPI job will now abort)\n",
        "collective-mismatch", "low", None),
    # torch/distributed/tensor/_utils.py (compute_global_tensor_shape, torch 2.13)
    "dtensor-shape": (
        "[rank1]: RuntimeError: Non-sharded dimensions should have identical size across "
        "ranks.\n",
        "collective-mismatch", "high", 1),
    # torch/distributed/tensor debug check of a Replicate placement (torch 2.13)
    "dtensor-replicate": (
        "[rank0]: AssertionError: Replicate output[0] but local values differ across ranks\n",
        "collective-mismatch", "high", 0),
    # ROCm TransferBench (hipDeviceCanAccessPeer is 0 for the pair)
    "transferbench-peer": (
        "[ERROR] Unable to enable peer access from GPU devices 1 to 0\n",
        "gpu-p2p-broken", "high", None),
    # NVIDIA driver kernel log: Xid 74 is an NVLink error (NVIDIA Xid catalogue)
    "xid-74-nvlink": (
        "[ 8123.456] NVRM: Xid (PCI:0000:41:00): 74, pid=3321, name=python, NVLink: fatal "
        "error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)\n",
        "gpu-p2p-broken", "high", None),
    # Linux drivers/iommu/arm/arm-smmu-v3: a DMA translation fault (peer copy blocked)
    "arm-smmu-event": (
        "[ 512.1] arm-smmu-v3 arm-smmu-v3.3.auto: event 0x10 received:\n"
        "[ 512.1] arm-smmu-v3 arm-smmu-v3.3.auto: \t0x0000010000000010\n",
        "gpu-p2p-broken", "high", None),
    # a reporter's finding: turning the IOMMU off (kernel command line) fixed the hang
    "iommu-finding": (
        "NCCL hangs in the first all_reduce on 2 GPUs; booting with iommu=pt fixed it.\n",
        "gpu-p2p-broken", "low", None),
    # a reporter's finding with NCCL_P2P_LEVEL (NCCL env docs)
    "p2p-level-finding": (
        "The training hangs at the first all_reduce; it worked after setting "
        "NCCL_P2P_LEVEL=LOC.\n",
        "gpu-p2p-broken", "low", None),
    # nvidia-smi topo -p2p r: a pair that cannot peer (legend: NS = Not supported)
    "topo-p2p-matrix": (
        " \tGPU0\tGPU1\n GPU0\tX\tNS\n GPU1\tNS\tX\n",
        "gpu-p2p-broken", "low", None),
    # NCCL src/transport/net_ib/connect.cc (2.2x), quoted in torch's "Last error:"
    "ib-incompatible-link-layer": (
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "Last error:\n"
        "NET/IB : Remote RoCE device is incompatible with the local [0]mlx5_0:1/IB. Try "
        "selecting NICs of only one link type using NCCL_IB_HCA\n",
        "nccl-network", "high", None),
    # NCCL src/transport/net_ib/common.cc: an IB fatal event made the communicator fail
    "ib-fatal-communicator": (
        "Last error:\ncommunicator encountered a fatal error (detected in ncclIbTest)\n",
        "nccl-network", "high", None),
    # NCCL src/bootstrap.cc
    "nccl-comm-id": (
        "node1:100:100 [0] NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> "
        "or [<ipv6>]:<port> or <hostname>:<port>\n",
        "nccl-network", "high", None),
    # a reporter's finding: the job works once NCCL stops using InfiniBand
    "ib-disable-finding": (
        "Two-node torchrun crashes; it works with NCCL_IB_DISABLE=1 added to the command.\n"
        "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.\n",
        "nccl-network", "low", None),
    # Open MPI opal/mca/btl/tcp help-mpi-btl-tcp.txt
    "ompi-peer-disconnected": (
        "An MPI communication peer process has unexpectedly disconnected.  This\n"
        "usually indicates a failure in the peer process (e.g., a crash or\n"
        "otherwise exiting without calling MPI_FINALIZE first).\n",
        "peer-connection-closed", "medium", None),
    # MPICH / Intel MPI error stack when the peer process is gone
    "mpich-communication-error": (
        "Fatal error in PMPI_Allreduce: Unknown error class, error stack:\n"
        "MPIDI_CH3_Progress_wait(224)....: an error occurred while handling an event\n"
        "MPIDI_CH3I_Progress_handle_sock_event(533): Communication error with rank 1\n",
        "peer-connection-closed", "medium", None),
    # libuv's uv_strerror(ECONNRESET) as the c10d libuv backend logs it (lower case)
    "libuv-reset": (
        "[W socket.cpp:663] [c10d] Read callback failed. code:-104 name:ECONNRESET desc:"
        "connection reset by peer\n",
        "peer-connection-closed", "medium", None),
    # torch elastic utils/distributed.py _check_full_rank
    "full-rank-check": (
        "TimeoutError: timed out waiting for all 4 members to join\n",
        "rendezvous-timeout", "low", None),
    # an errno name in a c10d connect error
    "enetunreach": (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any "
        "network address of (10.1.0.1, 29500). code: -101, name: ENETUNREACH\n",
        "rendezvous-timeout", "medium", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wording(tmp_path: Path, name: str) -> None:
    text, rule, confidence, rank = CASES[name]
    assert _verdict(tmp_path, text) == (rule, confidence, rank)


@pytest.mark.parametrize(("text", "not_rule"), [
    # a connect timeout to the store is the rendezvous, not a store wait (torch socket.cpp)
    ("[W socket.cpp:464] [c10d] The client socket has timed out after 1800s while trying to "
     "connect to (node0, 29500).\n"
     "[W socket.cpp:489] [c10d] waitForInput: socket SocketImpl(fd=9) timed out after "
     "1800000ms\n", "collective-timeout"),
    # a store-based barrier at init waiting for ranks that never joined is the job's shape
    ("torch.distributed.DistStoreError: Timed out initializing process group in store based "
     "barrier on rank 3, for key: store_based_barrier_key:1 (world_size=8, worker_count=4, "
     "timeout=0:30:00)\n", "collective-timeout"),
    # a checkpoint of another world size is not a collective of different sizes (DeepSpeed)
    ("deepspeed.runtime.zero: The checkpoint being loaded used a DP world size of 8 but the "
     "current world size is 4.\n", "collective-mismatch"),
    # an MPI process that died is not a mismatch (Open MPI prterun)
    ("An MPI communication peer process has unexpectedly disconnected.\n",
     "collective-mismatch"),
    # an ordinary GPU error with an Xid other than 74 is not NVLink (Xid 79: fallen off bus)
    ("NVRM: Xid (PCI:0000:41:00): 79, pid=3321, GPU has fallen off the bus.\n",
     "gpu-p2p-broken"),
    # the legend of nvidia-smi topo -p2p alone is no finding
    ("Legend:\n  X    = Self\n  OK   = Status Ok\n  CNS  = Chipset not supported\n"
     "  NS   = Not supported\n", "gpu-p2p-broken"),
    # nvidia-smi topo -m (NVLink matrix) is not the p2p matrix
    (" \tGPU0\tGPU1\tCPU Affinity\n GPU0\t X \tNV12\t0-63\n GPU1\tNV12\t X \t0-63\n",
     "gpu-p2p-broken"),
    # a finding that did not help is no finding
    ("Disabling the IOMMU did not change anything.\n", "gpu-p2p-broken"),
    ("Setting NCCL_IB_DISABLE=1 did not help.\n"
     "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.\n",
     "nccl-network"),
    # a peer resetting the connection is not a rendezvous failure
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed "
     "by peer [10.0.0.2]:40000\n", "rendezvous-timeout"),
])
def test_neighbour_not_taken(tmp_path: Path, text: str, not_rule: str) -> None:
    assert _verdict(tmp_path, text)[0] != not_rule


def test_every_packaged_pattern_has_a_prefilter_key() -> None:
    # the pure-Python finder (no Hyperscan) scans for each pattern's literal key; a
    # pattern without one (no literal run of 4+ characters) would match every line there
    from distrun.diagnose import default_rules
    from distrun.diagnose.rules import pattern_key

    keyless = [p for rule in default_rules().rule for p in rule.patterns + rule.weak
               if not pattern_key(p)]
    assert keyless == []
