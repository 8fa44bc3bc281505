"""Hang tails: what a job that hung prints last, in a log with no error line at all.

A rule's ``tail`` lines name it at low confidence when a log with no error line ends with
them (within its last 30 lines); its ``past_tail`` lines (what a healthy run prints after
them) cancel that. Each log is short and built around the real lines; the comment names
where they come from. Assertions are what the user sees: the rule and how sure, or that
nothing failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose


def _nccl_init(ranks: int, channel: str, transport: str, host: str = "gpu-node1") -> str:
    """NCCL_DEBUG=INFO start-up lines of ``ranks`` processes on one host (NCCL init.cc,
    bootstrap.cc, transport/p2p.cc), each connecting to the next over ``transport``."""
    lines = [f"{host}:{100 + r}:{100 + r} [{r}] NCCL INFO Bootstrap : Using eth0:10.1.1.5<0>"
             for r in range(ranks)]
    lines.append("NCCL version 2.18.5+cuda12.2")
    lines += [f"{host}:{100 + r}:{200 + r} [{r}] NCCL INFO Setting affinity for GPU {r} to ffff"
              for r in range(ranks)]
    for number in range(2):
        lines += [f"{host}:{100 + r}:{200 + r} [{r}] NCCL INFO "
                  + channel.format(c=number, r=r, n=(r + 1) % ranks) + f" via {transport}"
                  for r in range(ranks)]
    return "\n".join(lines) + "\n"


_TORCHRUN = (
    "WARNING:torch.distributed.run:\n*****************************************\n"
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed.\n*****************************************\n"
)
# NCCL >= 2.12 transport/p2p.cc: "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s"
_NEW = "Channel {c:02d}/0 : {r}[{r}] -> {n}[{n}]"
# NCCL 2.7 - 2.11: "Channel %02d : %d[%lx] -> %d[%lx] via P2P/IPC" (bus ids)
_OLD = "Channel {c:02d} : {r}[{r}1000] -> {n}[{n}1000]"
# NCCL 2.4: "Ring %02d : %d[%d] -> %d[%d] via P2P/IPC"
_RING = "Ring {c:02d} : {r}[{r}] -> {n}[{n}]"
_COMPLETE = "".join(
    f"gpu-node1:{100 + r}:{200 + r} [{r}] NCCL INFO comm 0x55d0c0 rank {r} nranks 2 cudaDev {r} "
    f"busId {r + 1}000 commId 0x8f3a - Init COMPLETE\n" for r in range(2))
_RINGS = "".join(f"gpu-node1:{100 + r}:{200 + r} [{r}] NCCL INFO Connected all rings\n"
                 for r in range(2))

HANGS = {
    # DDP on two PCIe GPUs: NCCL 2.18 connects its rings over P2P/IPC at init, then the
    # first all_reduce never completes (no error, the job sits at 100 % GPU)
    "p2p-ipc-nccl-2.18": (_TORCHRUN + _nccl_init(2, _NEW, "P2P/IPC/read") + _RINGS
                          + _COMPLETE, "gpu-p2p-broken"),
    # NCCL 2.12 - 2.18 with read mode, Init COMPLETE printed before the job's own output
    "p2p-ipc-read-nccl-2.12": (_TORCHRUN + _COMPLETE + _nccl_init(2, _NEW, "P2P/IPC/read"),
                               "gpu-p2p-broken"),
    # NCCL 2.7 - 2.11 wording (bus ids in brackets), four GPUs
    "p2p-ipc-nccl-2.8": (_nccl_init(4, _OLD, "P2P/IPC"), "gpu-p2p-broken"),
    # NCCL 2.4 rings; one process driving both GPUs connects them by direct pointer
    "p2p-ring-nccl-2.4": (_nccl_init(2, _RING, "P2P/direct pointer"), "gpu-p2p-broken"),
    # RCCL (ROCm) prints NCCL's lines, its version banner in between
    "p2p-rccl": ("supllm:402:402 [0] NCCL INFO RCCL version : 2.22.3-HEAD:271856d\n"
                 + _nccl_init(2, _NEW, "P2P/IPC", host="supllm"), "gpu-p2p-broken"),
    # torchelastic c10d rendezvous (torch/distributed/elastic/agent/server/api.py and
    # rendezvous/dynamic_rendezvous.py, LOGLEVEL=INFO): node 0 waits for node 1
    "rdzv-c10d-join": (
        "INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:\n"
        "  entrypoint       : train.py\n  min_nodes        : 2\n  max_nodes        : 2\n"
        "  nproc_per_node   : 8\n  rdzv_backend     : c10d\n"
        "  rdzv_endpoint    : 10.0.0.1:29400\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n"
        "INFO:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node "
        "'node0_22841_0' attempts to join the next round of the rendezvous 'job42'.\n",
        "rendezvous-timeout"),
    # the same in torch >= 2.2's glog-style prefix
    "rdzv-c10d-join-glog": (
        "I0612 10:01:02.123000 22841 torch/distributed/elastic/agent/server/api.py:707] "
        "[default] Rendezvous'ing worker group\n"
        "I0612 10:01:02.130000 22841 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py"
        ":1151] The node 'node0_22841_0' attempts to join the next round of the rendezvous "
        "'job42'.\n", "rendezvous-timeout"),
    # torch/distributed/elastic/rendezvous/etcd_rendezvous.py
    "rdzv-etcd-peers": (
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Etcd machines: "
        "['http://0.0.0.0:2379']\n"
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Attempting to join next "
        "rendezvous\n"
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:New rendezvous state "
        "created: {'status': 'joinable', 'version': '1', 'participants': []}\n"
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Joined rendezvous version 1 "
        "as rank 0. Full state: {'status': 'joinable', 'version': '1', 'participants': [0]}\n"
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Waiting for remaining "
        "peers.\n", "rendezvous-timeout"),
    # torch 1.8 - 2.0 distributed_c10d._store_based_barrier (INFO): rank 0 added its key and
    # waits for the other ranks of init_process_group to add theirs
    "store-barrier-added-key": (
        "INFO:torch.distributed.distributed_c10d:Added key: store_based_barrier_key:1 to store "
        "for rank: 0\n", "world-size-mismatch"),
}


@pytest.mark.parametrize("case", sorted(HANGS))
def test_a_hang_that_ends_in_these_lines_names_the_rule(tmp_path: Path, case: str) -> None:
    text, rule = HANGS[case]
    log = tmp_path / "hang.log"
    log.write_text(text)
    result = diagnose([log])
    assert result.causes, case
    assert (result.causes[0].rule.id, result.confidence) == (rule, "low")


# What a healthy run prints after each tail (the rule's past_tail): nothing failed
GOES_ON = {
    # torch reducer.cpp (TORCH_DISTRIBUTED_DEBUG=INFO): DDP's first iteration finished
    "ddp-first-iteration": (
        "p2p-ipc-nccl-2.18",
        "I0612 10:02:00.001 reducer.cpp:1300] Reducer buckets have been rebuilt in this "
        "iteration.\n"),
    # NCCL init.cc at ncclCommDestroy: the job finished
    "nccl-destroy": ("p2p-rccl", "supllm:402:402 [0] NCCL INFO comm 0x55d0c0 rank 0 nranks 2 "
                                 "cudaDev 0 busId 1000 - Destroy COMPLETE\n"),
    # NCCL transport/net.cc: the ring goes on to another node (a multi-node job)
    "nccl-net-ib": ("p2p-ipc-nccl-2.18",
                    "gpu-node1:101:201 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via "
                    "NET/IB/0\n"),
    "c10d-joined": (
        "rdzv-c10d-join",
        "INFO:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'node0_22841_0' "
        "has joined round 0 of the rendezvous 'job42' as rank 0 in a world of size 2.\n"),
    "agent-rendezvous-complete": (
        "rdzv-c10d-join-glog",
        "I0612 10:01:09.551000 22841 torch/distributed/elastic/agent/server/api.py:553] "
        "[default] Rendezvous complete for workers. Result:\n  restart_count=0\n"
        "  master_addr=node0\n  master_port=29500\n  group_rank=0\n  group_world_size=2\n"),
    # torch >= 1.10 distributed_c10d: every rank added its key
    "store-barrier-completed": (
        "store-barrier-added-key",
        "INFO:torch.distributed.distributed_c10d:Rank 0: Completed store-based barrier for "
        "key:store_based_barrier_key:1 with 2 nodes.\n"),
    "etcd-peers-arrived": (
        "rdzv-etcd-peers",
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:All peers arrived. "
        "Confirming membership.\n"),
}


@pytest.mark.parametrize("case", sorted(GOES_ON))
def test_a_run_that_went_on_past_the_tail_is_no_hang(tmp_path: Path, case: str) -> None:
    hang, after = GOES_ON[case]
    log = tmp_path / "ok.log"
    log.write_text(HANGS[hang][0] + after)
    result = diagnose([log])
    assert not result.causes and not result.failed, case


def test_nccl_runtime_connect_lines_are_no_hang(tmp_path: Path) -> None:
    """NCCL >= 2.22 connects peers when first used (cuMem since 2.19): its P2P/CUMEM lines
    come between training steps, so they are no tail."""
    log = tmp_path / "lazy.log"
    log.write_text(_TORCHRUN + _COMPLETE + "step 10/200 | loss 2.31\n"
                   + _nccl_init(2, _NEW, "P2P/CUMEM/read"))
    assert not diagnose([log]).causes


def test_a_tail_far_from_the_end_is_no_hang(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    log.write_text(HANGS["p2p-ipc-nccl-2.18"][0]
                   + "".join(f"epoch 0 batch {i} done\n" for i in range(40)))
    assert not diagnose([log]).causes


# An error line decides; the tail is not read
DECIDED = {
    # torch c10d: CUDA OOM raised after NCCL set up its P2P rings
    "oom-after-p2p": (
        "p2p-ipc-nccl-2.18",
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
        "has a total capacity of 23.65 GiB of which 1.06 GiB is free.\n",
        "cuda-out-of-memory"),
    # torchelastic dynamic_rendezvous.py: the join's deadline passed
    "rdzv-timeout-error": (
        "rdzv-c10d-join",
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n",
        "rendezvous-timeout"),
    # NCCL's shm transport fails (Docker's 64 MB /dev/shm) after the P2P channels
    "shm-after-p2p": (
        "p2p-ipc-nccl-2.8",
        "gpu-node1:101:201 [1] include/shm.h:48 NCCL WARN Error while creating shared memory "
        "segment nccl-shm-recv-b3d54cebe4167a34-0-1-0 (size 9637888)\n",
        "shm-bus-error"),
}


@pytest.mark.parametrize("case", sorted(DECIDED))
def test_an_error_line_decides_not_the_tail(tmp_path: Path, case: str) -> None:
    hang, after, rule = DECIDED[case]
    log = tmp_path / "err.log"
    log.write_text(HANGS[hang][0] + after)
    result = diagnose([log])
    assert result.causes and result.causes[0].rule.id == rule, case
