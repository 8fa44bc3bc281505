"""Wordings added in session 17 by helper at (issue 12): short pastes with no error line for the
peer-to-peer, network and collective categories (the reporter's own finding, NCCL's RAS client).

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

P2P = "gpu-p2p-broken"
NET = "nccl-network"
MISMATCH = "collective-mismatch"
TIMEOUT = "collective-timeout"

# NCCL src/ras/client_support.cc (ncclras, NCCL >= 2.24), run while a job hangs
RAS_HEADER = "Warnings\n========\n\n#0-0 (27a079b828ff1a75) MISMATCH\n"

CASES: dict[str, Case] = {
    # the reporter's finding, worded apart from "works with NCCL_P2P_DISABLE=1"
    "p2p disable, by setting the variable": (
        "the model freezes when using 4 or more GPUs. I confirmed that the model works by "
        "setting the variable NCCL_P2P_DISABLE =1 .\n", P2P, "low", None),
    "p2p disable named as the solution": (
        "I found the solution to the problem: use `export NCCL_P2P_DISABLE=1`, the freezing is "
        "gone\n", P2P, "low", None),
    "p2p disable, once exported": (
        NOISE + "training runs once exporting NCCL_P2P_DISABLE=1\n", P2P, "low", None),
    # the interface choice (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME) named as the fix
    "socket ifname fixed it": (
        "It hung in the first allreduce across the two nodes.\n"
        "exporting NCCL_SOCKET_IFNAME=eno1 fixed it, thanks\n", NET, "low", None),
    "gloo socket ifname, works after": (
        "works after setting GLOO_SOCKET_IFNAME=enp4s0 on both machines\n", NET, "low", None),
    # a collective called under a main-process guard (accelerate, Lightning)
    "gather under is_main_process": (
        "It looks like the problem was gather_for_metrics() isn't happy to be under "
        "accelerator.is_main_process().\n", MISMATCH, "low", None),
    "all_gather and is_global_zero hang": (
        "`all_gather` and `is_global_zero` make the program hang forever, no other error "
        "messages.\n", MISMATCH, "low", None),
    "all_reduce inside if is_local_main_process": (
        "the script stalls because dist.all_reduce is inside if accelerator.is_local_main_process\n",
        MISMATCH, "low", None),
    # NCCL RAS: ranks of one communicator at different collective counts
    "ras operation counts differ": (
        RAS_HEADER + "  Communicator ranks have different AllReduce operation counts\n"
        "  3 ranks have launched up to operation 6650\n"
        "  Rank 2 has launched up to operation 6649 -- GPU 2 managed by process 4242 on node n1\n",
        TIMEOUT, "low", None),
    "ras rank never launched": (
        RAS_HEADER + "  Communicator ranks have different status\n"
        "  Rank 5 has not launched any operations -- GPU 5 managed by process 4247 on node n1\n",
        TIMEOUT, "low", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a strong cause elsewhere in the log keeps its verdict over the reporter's sentence
    "p2p sentence beside a CUDA OOM": (
        NOISE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "it works by setting NCCL_P2P_DISABLE=1 but still runs out of memory\n",
        "cuda-out-of-memory"),
    "ifname sentence beside an address in use": (
        "RuntimeError: The server socket has failed to listen on any local network address. "
        "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
        "use).\nworks with NCCL_SOCKET_IFNAME=eth0 on the other node\n", "address-in-use"),
    # the reporter's negative finding is no finding
    "p2p workaround that did not help": (
        NOISE + "the workaround NCCL_P2P_DISABLE=1 did not help, it still freezes\n", None),
    "socket ifname did not help": (
        NOISE + "setting NCCL_SOCKET_IFNAME=eth0 did not help, it still hangs\n", None),
    # a guard around logging, not around a collective
    "print under is_main_process": (
        NOISE + "I only print the loss under accelerator.is_main_process and it hangs\n", None),
    # the RAS client's summary of a healthy communicator names no cause
    "ras summary table": (
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        "    0         1         2         4         8         8   RUNNING      OK\n", None),
    # a gather on every rank, then rank-0-only saving: no collective under the guard
    "gather then save on main": (
        NOISE + "preds = accelerator.gather(preds); the main process saves them\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
