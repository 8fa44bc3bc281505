"""Wordings of the collective, network, rendezvous, launcher, process-group and JAX rules that are not
"Error:" lines: desync reports, stall and rendezvous warnings, INFO lines a hung job ends with, old
and new jaxlib wordings (rule writer rC10).

Each log is short and built around the real message; the comment names where the message comes
from. Assertions are what the user sees: the rule, how sure, the rank. The negative cases are a
neighbouring category's message that the new patterns must not take.
"""

from __future__ import annotations

from tests.diagnose.wording import wording_tests

# (log text, rule id, confidence, rank or None)
CASES = {
    # torch c10d TraceUtils.h retrieveDesyncReport (TORCH_NCCL_DESYNC_DEBUG=1), a rank that never
    # joined: the report alone, without the watchdog's own line
    "desync-report-missing-ranks": (
        "[rank0]:[E ProcessGroupNCCL.cpp:577] [Rank 0] Desync debugging report:\n"
        "\t - [0] Timeout at collective: ALLREDUCE, #12\n"
        "\t - To our best knowledge, ranks [3] are the lagging ranks that caused this timeout. They "
        "never joined any collectives\n",
        "collective-timeout", "medium", None),
    # the same report when every rank joined but one lags
    "desync-report-lagging": (
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "\t   - [1] joined but didn't finish collective #7 (count from 1)\n",
        "collective-timeout", "medium", None),
    # horovod/common/stall_inspector.cc with HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, the end of its report
    # (the warning above it, when pasted too, is the mismatch rule's weak wording)
    "horovod-stall-shutdown": (
        "Stalled ranks:\n"
        "1!: [DistributedAdam_Allreduce/grad_0]\n"
        "One or more rank (marked by \"!\") is stalled for longer than 120 seconds. Will shutdown.\n",
        "collective-timeout", "medium", None),
    # xla/service/rendezvous.cc termination timeout (jaxlib GPU collectives)
    "xla-rendezvous-termination": (
        "E0115 10:22:31.123456  4242 rendezvous.cc:127] [id=3] Termination timeout for `all-reduce "
        "run_id=12 op_id=0` of 40 seconds exceeded. Exiting to ensure a consistent program state. "
        "Expected 8 threads to join the rendezvous, but only 7 of them arrived on time.\n",
        "collective-timeout", "medium", None),
    # xla/service/rendezvous.cc: the stuck warning is what a hung JAX job prints last
    "xla-rendezvous-stuck-tail": (
        "I0115 10:20:01.000000  4242 gpu_executable.cc:451] Running all-reduce.3\n"
        "W0115 10:20:21.000000  4242 rendezvous.cc:91] [id=3] This thread has been waiting for "
        "`all-reduce run_id=12 op_id=0` for 20 seconds and may be stuck. Expected 8 threads to join "
        "the rendezvous, but not all of them arrived on time.\n",
        "collective-timeout", "low", None),
    # torch ProcessGroupNCCL::dumpDebuggingInfo, the only trace of a timeout in the pasted part
    "pg-nccl-dump-debug-info": (
        "[rank2]:[E1105 09:01:02.345678 ProcessGroupNCCL.cpp:1234] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 2] ProcessGroupNCCL preparing to dump debug info.\n",
        "collective-timeout", "low", 2),
    # torch elastic etcd_rendezvous.py: the INFO line before RendezvousTimeoutError
    "etcd-rendezvous-timeout-info": (
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Attempting to join next rendezvous\n"
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Rendezvous timeout occurred in "
        "EtcdRendezvousHandler\n",
        "rendezvous-timeout", "medium", None),
    # python-etcd: the etcd server named by --rdzv_endpoint cannot be reached
    "python-etcd-connection-failed": (
        "etcd.EtcdException: Connection to etcd failed due to MaxRetryError(\"HTTPConnectionPool("
        "host='10.0.0.1', port=2379): Max retries exceeded with url: /v2/machines\")\n",
        "rendezvous-timeout", "medium", None),
    # torch elastic agent/server/api.py: a node waiting in the rendezvous, the last line of its log
    "elastic-agent-rendezvousing-tail": (
        "[2024-03-01 10:00:00,000] torch.distributed.launcher.api: [INFO] Starting elastic_operator "
        "with launch configs:\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n",
        "rendezvous-timeout", "low", None),
    # torch elastic etcd_rendezvous.py: waiting for the other nodes to confirm
    "etcd-waiting-confirmations-tail": (
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:All peers arrived. Confirming "
        "membership.\n"
        "INFO:torch.distributed.elastic.rendezvous.etcd_rendezvous:Waiting for confirmations from "
        "all peers.\n",
        "rendezvous-timeout", "low", None),
    # PaddlePaddle distributed/launch master.py sync_peers: a node that never sees its peers
    "paddle-waiting-peer-start-tail": (
        "LAUNCH INFO 2022-07-20 09:38:33,360 Job: default, mode collective, replicas 2[2:2], elastic "
        "False\n"
        "LAUNCH INFO 2022-07-20 09:38:33,367 Waiting peer start...\n",
        "rendezvous-timeout", "low", None),
    # horovod/runner: no common interface between the hosts
    "horovod-no-common-interface": (
        "Exception: Unable to find a set of common task-to-task communication interfaces: [(0, "
        "{'eth0': [('10.0.0.1', 12345)]}), (1, {'ib0': [('192.168.0.2', 12345)]})]\n",
        "nccl-network", "high", None),
    # NCCL src/net.cc: NCCL_NET names a network that is not there
    "nccl-net-not-found": (
        "node1:4242:4242 [0] NCCL INFO NCCL_NET set by environment to IB\n"
        "node1:4242:4242 [0] NCCL WARN Error: network IB not found.\n",
        "nccl-network", "high", None),
    # NCCL src/bootstrap.cc (2.23+): a process outside the communicator's ranks
    "nccl-bootstrap-localid-out-of-range": (
        "node1:4242:4300 [0] NCCL WARN Bootstrap Root : localId 3 is out of range\n",
        "world-size-mismatch", "high", None),
    # a user's one-line account of a Lightning job that waits for processes that never come
    "lightning-hangs-at-initializing-ddp": (
        "Training with `--gpus 0,` works but with `--gpus 0,1` it hangs at `initializing ddp: "
        "GLOBAL_RANK: 0, MEMBER: 1/2`\n",
        "world-size-mismatch", "low", None),
    # accelerate state.py: an MPI-style multi-node start without MASTER_ADDR
    "accelerate-multinode-no-master-addr": (
        "ValueError: Tried to launch on distributed with multinode, but `MASTER_ADDR` env was not "
        "set, please try exporting rank 0's hostname as `MASTER_ADDR`\n",
        "no-launcher", "high", None),
    # torch distributed/rendezvous.py tcp:// handler without rank
    "tcp-rendezvous-rank-missing": (
        "ValueError: Error initializing torch.distributed using tcp:// rendezvous: rank parameter "
        "missing\n",
        "no-launcher", "high", None),
    # DeepSpeed utils/groups.py
    "deepspeed-expert-group-not-initialized": (
        "AssertionError: expert data parallel group is not initialized\n",
        "default-pg-not-initialized", "high", None),
    # torch distributed/device_mesh.py
    "device-mesh-groups-not-initialized": (
        "RuntimeError: DeviceMesh process groups not initialized!\n",
        "default-pg-not-initialized", "high", None),
    # jaxlib 0.3.x xla/pjrt/distributed/service.cc: a process never called Connect()
    "jaxlib-03-connect-timeout": (
        "RuntimeError: DEADLINE_EXCEEDED: Timed out after 300s waiting for all nodes to call "
        "Connect()\n",
        "jax-coordination", "medium", None),
    # jaxlib 0.3.x: two processes with one process_id
    "jaxlib-03-duplicate-node": (
        "jaxlib.xla_extension.XlaRuntimeError: ABORTED: Duplicate node ID 1\n",
        "jax-coordination", "medium", None),
    # xla/pjrt/distributed/client.cc (jaxlib 0.4.x)
    "jax-failed-to-connect-controller": (
        "E0301 10:00:00.000000 4242 client.cc:66] Failed to connect to distributed JAX controller: "
        "UNAVAILABLE: failed to connect to all addresses\n",
        "jax-coordination", "medium", None),
    # xla/tsl coordination_service.cc barrier timeout without the status-code prefix
    "tsl-barrier-timed-out-id": (
        "Barrier timed out. Id: PjRT_Client_Connect. This usually happens because a task triggered "
        "the barrier too early or too slowly. Please look at the task logs (both timed out and first "
        "task) to debug further.\n",
        "jax-coordination", "medium", None),
    # xla/tsl coordination_service.cc: processes passed different task lists to one barrier
    "tsl-conflicting-barrier-tasks": (
        "INVALID_ARGUMENT: Conflicting tasks specified by different processes for the same barrier: "
        "sync_step_10\n",
        "jax-coordination", "medium", None),
    # jax/_src/clusters/k8s_cluster.py
    "jax-k8s-not-indexed": (
        "RuntimeError: To enable automatic bootstrap in a K8s cluster, jobs must be indexed by setting "
        "`completionMode: \"Indexed\"`.\n",
        "jax-coordination", "medium", None),
    # jax/_src/distributed.py INFO, the last line of a start-up that never connects
    "jax-connecting-tail": (
        "INFO:jax._src.distributed:Connecting to JAX distributed service on 10.0.0.1:1234\n",
        "jax-coordination", "low", None),
    # jaxlib 0.3.x service.cc HeartbeatLoop
    "jaxlib-03-missed-heartbeats": (
        "I0301 10:00:00.000000 4242 service.cc:301] Missed heartbeats from node 1. Shutting down.\n",
        "jax-task-died", "medium", None),
    "jaxlib-03-shutdown-timeout": (
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Timed out after 5m0s waiting for "
        "all nodes to call Shutdown()\n",
        "jax-task-died", "medium", None),
}

# (log text, rule id or None): what the new wordings must leave to others
NEGATIVE = {
    # NCCL's INFO on a host without InfiniBand: healthy, the socket transport is used
    "nccl-ib-no-device-info": (
        "node1:4242:4242 [0] NCCL INFO NET/IB : No device found.\n"
        "node1:4242:4242 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n",
        None),
    # XLA's stuck warning followed by its false-alarm note: the job went on
    "xla-stuck-then-unstuck": (
        "W0115 10:20:21.000000  4242 rendezvous.cc:91] [id=3] This thread has been waiting for "
        "`all-reduce` for 20 seconds and may be stuck. Expected 8 threads to join the rendezvous, but "
        "not all of them arrived on time.\n"
        "W0115 10:20:25.000000  4242 rendezvous.cc:99] [id=3] This thread is unstuck waiting for "
        "`all-reduce` after 24s. Threads joined rendezvous with significant delay, system can be "
        "overloaded and threads make progress at different rate. Warning above was a false-positive.\n",
        None),
    # the rendezvous completed and the workers started: no hang at the rendezvous
    "elastic-rendezvous-then-start": (
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. "
        "Result:\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group\n",
        None),
    # JAX connected: the INFO line before it is not a hang
    "jax-connecting-then-connected": (
        "INFO:jax._src.distributed:Connecting to JAX distributed service on 10.0.0.1:1234\n"
        "I0301 10:00:01.000000 4242 client.cc:101] Connected to distributed JAX controller\n",
        None),
    # a single-node job ending in peer-to-peer connections stays the peer-to-peer rule's
    "p2p-connections-not-network": (
        "node1:4242:4300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
        "node1:4242:4300 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read\n",
        "gpu-p2p-broken"),
    # the JAX shutdown barrier timing out is a task that died, not a start-up problem
    "tsl-shutdown-barrier-timeout": (
        "DEADLINE_EXCEEDED: Barrier timed out. Id: Shutdown::2093843. This usually happens because a "
        "task triggered the barrier too early or too slowly.\n"
        "Shutdown barrier has failed.\n",
        "jax-task-died"),
    # Slurm's hang at Lightning's start-up stays the Slurm rule's (its own tail)
    "lightning-slurm-tail-not-world-size": (
        "Multi-processing is handled by Slurm.\n"
        "GPU available: True, used: True\n"
        "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8\n",
        "slurm-allocation-mismatch"),
    # Horovod's stall warning alone stays the mismatch rule's weak wording
    "horovod-stall-warning-is-mismatch-weak": (
        "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
        "and are waiting for remainder of ranks for more than 60 seconds. This may indicate that "
        "different ranks are trying to submit different tensors or that only subset of ranks is "
        "submitting tensors, which will cause deadlock.\n",
        "collective-mismatch"),
    # torch's own store connect timeout stays the existing wording of the rendezvous rule
    "c10d-client-timeout": (
        "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying "
        "to connect to (10.0.0.1, 29400).\n",
        "rendezvous-timeout"),
    # an ordinary NCCL unhandled system error is not the NCCL_NET wording (same rule, weakly)
    "nccl-error-network-word": (
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
        "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n",
        "nccl-network"),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEGATIVE)
