"""Wordings added in session 15 by helper aj (issue 12): GPU peer-to-peer and host memory.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

ACCELERATE_P2P = (
    "NotImplementedError: Using {cards} series doesn't support faster communication broadband via"
    " P2P or IB. Please set `NCCL_P2P_DISABLE=\"1\"` and `NCCL_IB_DISABLE=\"1\" or use `accelerate"
    " launch` which will do this automatically.\n")
TORCHRUN_SUMMARY = (
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0"
    " (pid: 4155) of binary: /usr/bin/python3\n")

CASES: dict[str, Case] = {
    # accelerate state.py PartialState: GeForce cards without P2P/IB, the variables unset
    "accelerate's RTX 4000 check": (
        NOISE + ACCELERATE_P2P.format(cards="RTX 4000"), "gpu-p2p-broken", "high", None),
    # accelerate 0.25-0.26 named the 3090 too; the torchrun summary after it is a consequence
    "accelerate's RTX 3090 check under torchrun": (
        NOISE + ACCELERATE_P2P.format(cards="RTX 3090 or 4000") + TORCHRUN_SUMMARY,
        "gpu-p2p-broken", "high", None),
    # tqdm prints "?it/s" before its first rate: the OOM killer ended the load of the weights
    "killed before tqdm's first rate": (
        "Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]Killed\n",
        "host-oom-or-killed", "medium", None),
    # docker build's classic builder: a RUN step ended by SIGKILL (128 + 9)
    "docker build step killed": (
        NOISE + "The command '/bin/sh -c pip install flash-attn' returned a non-zero code: 137\n",
        "host-oom-or-killed", "medium", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a docker build step that failed on its own names no kill
    "a docker build step that failed": (
        NOISE + "The command '/bin/sh -c pip install flash-attn' returned a non-zero code: 1\n", None),
    # a tqdm bar before its first rate, not killed, is progress
    "a tqdm bar before its first rate": (
        "Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
