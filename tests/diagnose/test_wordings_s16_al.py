"""Wordings added in session 16 (helper al) for nccl-network, from NCCL's source (src/misc/socket.cc,
src/transport/net_ib/gin.cc) and a development thread's plugin wording.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

CASES: dict[str, Case] = {
    # NCCL >= 2.28 net_ib/gin.cc, as torch's "Last error:" repeats it (no "NCCL WARN" prefix)
    "gin completion error after torch's last error": (
        NOISE + "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.\nLast error:\nNET/IB/GIN: Got completion from peer 10.0.0.2<40000> "
        "with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_0\n",
        "nccl-network", "high", None),
    # a net plugin's tag, no blank before the colon
    "plugin's completion error": (
        NOISE + "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 "
        "len=32696 vendor err 129 (Send)\n",
        "nccl-network", "high", None),
    # NCCL socket.cc: NCCL_COMM_ID is not <host>:<port>
    "comm id without a port": (
        NOISE + "node1:100:100 [0] misc/socket.cc:246 NCCL WARN Net : No valid "
        "<IPv4_or_hostname>:<port> pair found\n",
        "nccl-network", "high", None),
    "comm id ipv6 without a port": (
        NOISE + "node1:100:100 [0] misc/socket.cc:258 NCCL WARN Net : No valid [IPv6]:port pair "
        "found\n",
        "nccl-network", "high", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a completion without a status is no transport error: NET/IB's INFO about its devices
    "ib device list": (NOISE + "node1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB "
                       "ib0:10.0.0.1<0>\n", None),
    # a Python "no valid ... found" about a checkpoint names no network
    "no valid checkpoint": (NOISE + "ValueError: No valid checkpoint pair found in ./ckpt\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
