"""Wordings of the host-memory, peer-to-peer, collective, network and stop rules (rule writer rB9).

Each log is short and built around the real message; the comment names where the message
comes from. Assertions are what the user sees: the rule, how sure, the rank. The negative
cases are a neighbouring category's message that the new patterns must not take.
"""

from __future__ import annotations

from tests.diagnose.wording import wording_tests

# (log text, rule id, confidence, rank or None)
CASES = {
    # Linux mm/oom_kill.c out_of_memory(): nothing left to kill (panic)
    "kernel-no-killable-processes": (
        "[ 8123.456789] Out of memory and no killable processes...\n"
        "[ 8123.456801] Kernel panic - not syncing: System is deadlocked on memory\n",
        "host-oom-or-killed", "medium", None),
    # Linux mm/oom_kill.c dump_tasks() (4.x+), a dmesg excerpt cut before the victim line
    "kernel-dump-tasks": (
        "[ 9001.000001] Tasks state (memory values in pages):\n"
        "[ 9001.000002] [  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents "
        "oom_score_adj name\n"
        "[ 9001.000003] [   4242]  1000  4242 31457280 16252928 131072000        0             0 "
        "python\n",
        "host-oom-or-killed", "medium", None),
    # Linux 3.x dump_tasks() header (nr_ptes)
    "kernel-dump-tasks-3x": (
        "[ pid ]   uid  tgid total_vm      rss nr_ptes swapents oom_score_adj name\n",
        "host-oom-or-killed", "medium", None),
    # CPython multiprocessing BaseProcess.__repr__ (3.8+) in an assertion
    "multiprocessing-repr-sigkill": (
        "AssertionError: worker died: <Process name='Process-3' pid=4242 parent=4200 stopped "
        "exitcode=-SIGKILL>\n",
        "host-oom-or-killed", "medium", None),
    # joblib/loky process_executor.TerminatedWorkerError
    "loky-terminated-worker": (
        "joblib.externals.loky.process_executor.TerminatedWorkerError: A worker process managed "
        "by the executor was unexpectedly terminated. This could be caused by a segmentation "
        "fault while calling the function or by an excessive memory usage causing the Operating "
        "System to kill the worker.\n\nThe exit codes of the workers are {SIGKILL(-9)}\n",
        "host-oom-or-killed", "medium", None),
    # Ray >= 2.2 memory monitor (raylet), as the driver prints the OutOfMemoryError text
    "ray-memory-threshold": (
        "Memory on the node (IP: 10.0.0.1, ID: 8f3e) where the task (task ID: ffff, name=embed, "
        "pid=4242, memory used=3.10GB) was running was 60.10GB / 62.50GB (0.9616), which exceeds "
        "the memory usage threshold of 0.95. Ray killed this worker (ID: 1a2b) because it was "
        "the most recently scheduled task; to see more information about memory usage on this "
        "node, use `ray logs raylet.out -ip 10.0.0.1`.\n",
        "host-oom-or-killed", "medium", None),
    "ray-node-out-of-memory": (
        "(raylet) Worker exit type: NODE_OUT_OF_MEMORY Worker exit detail: Task was killed due "
        "to the node running low on memory.\n",
        "host-oom-or-killed", "medium", None),
    # AWS Batch / ECS task stopped reason
    "aws-batch-container-killed": (
        "Status reason: OutOfMemoryError: Container killed due to memory usage\n",
        "host-oom-or-killed", "medium", None),
    # Vertex AI custom training job error
    "vertex-ran-out-of-memory": (
        "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of "
        "137(SIGKILL). To find out more about why your job exited please check the logs.\n",
        "host-oom-or-killed", "medium", None),
    "vertex-status-137": (
        "The replica workerpool1-0 exited with a non-zero status of 137. Termination reason: "
        "Error.\n",
        "host-oom-or-killed", "medium", None),
    # Cloud Run / Cloud Functions
    "cloud-run-memory-limit": (
        "Memory limit of 512 MiB exceeded with 530 MiB used. Consider increasing the memory "
        "limit, see https://cloud.google.com/run/docs/configuring/memory-limits\n",
        "host-oom-or-killed", "medium", None),
    # Heroku router/dyno errors: R15 kills, R14 only swaps
    "heroku-r15": (
        "heroku[worker.1]: Error R15 (Memory quota vastly exceeded)\n"
        "heroku[worker.1]: Stopping process with SIGKILL\n",
        "host-oom-or-killed", "medium", None),
    "heroku-r14-weak": (
        "heroku[worker.1]: Error R14 (Memory quota exceeded)\n",
        "host-oom-or-killed", "low", None),
    # Grid Engine qacct -j
    "sge-qacct-137": (
        "failed       0\nexit_status  137                 \nru_wallclock 3600s\n",
        "host-oom-or-killed", "medium", None),
    # Hadoop YARN container diagnostics
    "yarn-container-killed-137": (
        "Container killed on request. Exit code is 137\nContainer exited with a non-zero exit "
        "code 137.\n",
        "host-oom-or-killed", "medium", None),
    # LSF job report
    "lsf-signal-termination": (
        "Exited with signal termination: Killed.\n\nResource usage summary:\n",
        "host-oom-or-killed", "medium", None),
    # horovodrun (horovod/runner/gloo_run.py): a worker SIGKILLed
    "horovodrun-status-137": (
        "[1]<stderr>:Epoch 1/10\nProcess 1 exit with status code 137.\nTerminating remaining "
        "workers after failure of Process 1.\n",
        "host-oom-or-killed", "medium", 1),
    # building a CUDA extension (flash-attn) killed by the OOM killer: gcc driver, nvcc, make
    "gcc-killed-signal": (
        "g++: fatal error: Killed signal terminated program cc1plus\n"
        "compilation terminated.\n"
        "ninja: build stopped: subcommand failed.\n",
        "host-oom-or-killed", "medium", None),
    "nvcc-cicc-signal-9": (
        "nvcc error   : '\"$CICC_PATH/cicc\"' died due to signal 9 (Kill signal)\n"
        "ninja: build stopped: subcommand failed.\n",
        "host-oom-or-killed", "medium", None),
    "make-error-137": (
        "make[2]: *** [CMakeFiles/ext.dir/build.make:76: ext.o] Error 137\n",
        "host-oom-or-killed", "medium", None),
    # Rust std::process::ExitStatus Display, Go os/exec ExitError
    "rust-signal-9": (
        "error: could not compile `tokenizers` (lib)\n\nCaused by:\n  process didn't exit "
        "successfully: `rustc --crate-name tokenizers` (signal: 9, SIGKILL: kill)\n",
        "host-oom-or-killed", "medium", None),
    "go-signal-killed": (
        "Error: exit status: signal: killed\n",
        "host-oom-or-killed", "medium", None),
    # glibc elf/dl-tls.c (lower case ENOMEM wording): weak
    "glibc-tls-enomem-weak": (
        "cannot allocate memory for thread-local data: ABORT\n",
        "host-oom-or-killed", "low", None),
    # kubectl get pod -o yaml: the container's last state
    "k8s-yaml-exitcode-137": (
        "    lastState:\n      terminated:\n        exitCode: 137\n        reason: Error\n",
        "host-oom-or-killed", "medium", None),
    # Linux mm/memcontrol.c mem_cgroup_print_oom_meminfo (cgroup v1 report in dmesg)
    "memcg-usage-limit-failcnt": (
        "[ 5120.000001] memory: usage 4194304kB, limit 4194304kB, failcnt 1234\n"
        "[ 5120.000002] Memory cgroup stats for /slurm/uid_1000/job_42: cache:0KB rss:4194304KB\n",
        "host-oom-or-killed", "medium", None),
    # torch ProcessGroupNCCL heartbeat monitor (2.3+): another rank's timeout through the store
    "nccl-global-dump-signal": (
        "[rank2]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 2] Received a global dump signal from "
        "rank 0, and will start to dump the debug info. Last enqueued NCCL work: 7, last "
        "completed NCCL work: 6.\n",
        "collective-timeout", "medium", 2),
    "nccl-no-heartbeat": (
        "[rank5]:[E ProcessGroupNCCL.cpp:1402] [PG 0 Rank 5] First PG on this rank that "
        "detected no heartbeat of its watchdog.\n",
        "collective-timeout", "medium", 5),
    # TF/XLA stream_executor cuda_driver.cc
    "xla-failed-enable-peer-access": (
        "W external/xla/xla/stream_executor/cuda/cuda_driver.cc:1310] failed to enable peer "
        "access from 0x55d1 to 0x55e2: CUDA_ERROR_TOO_MANY_PEERS: peer mapping resources "
        "exhausted\n",
        "gpu-p2p-broken", "high", None),
    # a reporter's finding with NCCL's P2P level knob (NVL: peer-to-peer over NVLink only)
    "p2p-level-nvl-finding-weak": (
        "Training hangs at the first all_reduce on 4x RTX A6000.\nUpdate: NCCL_P2P_LEVEL=NVL "
        "fixed it\n",
        "gpu-p2p-broken", "low", None),
    # NCCL src/misc/socket.cc (2.18-2.2x) / src/os/linux.cc (2.27+)
    "nccl-socket-try-accept": (
        "node1:4242:4300 [0] misc/socket.cc:483 NCCL WARN socketTryAccept: Accept failed: Too "
        "many open files\n",
        "nccl-network", "high", None),
    "nccl-os-socket-try-accept": (
        "node1:4242:4300 [0] os/linux.cc:412 NCCL WARN ncclOsSocketTryAccept: exceeded error "
        "retry count after 20 attempts, Resource temporarily unavailable\n",
        "nccl-network", "high", None),
    # NCCL >= 2.28 net_ib completion error wording
    "nccl-228-ib-completion": (
        "NET/IB: Got completion from peer 10.0.0.2<45123> with status=IBV_WC_RETRY_EXC_ERR(12) "
        "opcode=IBV_WC_SEND(0) vendor_err=129 hca mlx5_0\n",
        "nccl-network", "high", None),
    # NCCL/RCCL src/graph/paths.cc: the INFO for PCIe-connected GPUs without P2P (NCCL falls
    # back to SHM) is weak; the WARN for NVLink-connected GPUs (init fails) stays strong
    "nccl-info-p2p-disabled-pcie-weak": (
        "node1:12:12 [0] NCCL INFO P2P is disabled between connected GPUs 1 and 0. You can "
        "repress this message with NCCL_IGNORE_DISABLED_P2P=1.\n",
        "gpu-p2p-broken", "low", None),
    "nccl-warn-p2p-disabled-nvlink": (
        "node1:12:12 [0] NCCL WARN P2P is disabled between NVLINK connected GPUs 0 and 1. This "
        "should not be the case given their connectivity, and is probably due to a hardware "
        "issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.\n",
        "gpu-p2p-broken", "high", None),
    # bash's job report with glibc 2.36's strsignal(SIGKILL) in other languages (Debian libc.mo):
    # Czech and Spanish name the signal (strong), French/Italian only say "killed" (weak)
    "bash-killed-czech": (
        "./train.sh: \u0159\u00e1dek 3: 4242 Zabit (SIGKILL)          python train.py\n",
        "host-oom-or-killed", "medium", None),
    "bash-killed-spanish": (
        "./train.sh: l\u00ednea 3: 4242 Terminado (killed)      python train.py\n",
        "host-oom-or-killed", "medium", None),
    "bash-killed-french-weak": (
        "./train.sh: ligne 3 : 4242 Processus arr\u00eat\u00e9          python train.py\n",
        "host-oom-or-killed", "low", None),
    "bash-killed-italian-weak": (
        "./train.sh: riga 3: 4242 Ucciso                  python train.py\n",
        "host-oom-or-killed", "low", None),
    "bash-killed-korean-weak": (
        "./train.sh: \uc904 3: 4242 \uc8fd\uc5c8\uc74c                  python train.py\n",
        "host-oom-or-killed", "low", None),
    # strerror(ENOMEM) in German (glibc libc.mo), as fork reports it
    "fork-enomem-german-weak": (
        "./train.sh: fork: Nicht gen\u00fcgend Hauptspeicher verf\u00fcgbar\n",
        "host-oom-or-killed", "low", None),
    # strsignal(SIGBUS) in French (glibc libc.mo): weak, like the English "Bus error"
    "bash-bus-error-french-weak": (
        "./train.sh: ligne 3 : 4242 Erreur du bus           (core dumped) python train.py\n",
        "shm-bus-error", "low", None),
    # docker events / containerd CRI: the container's memory limit
    "docker-events-container-oom": (
        "2024-05-01T10:00:00.000000000Z container oom 4f2e9c1d7a3b (image=trainer:latest, "
        "name=train)\n2024-05-01T10:00:00.100000000Z container die 4f2e9c1d7a3b (exitCode=137, "
        "image=trainer:latest, name=train)\n",
        "host-oom-or-killed", "medium", None),
    "containerd-task-oom": (
        "time=\"2024-05-01T10:00:00Z\" level=info msg=\"TaskOOM event &TaskOOM{ContainerID:"
        "4f2e9c1d7a3b,XXX_unrecognized:[],}\"\n",
        "host-oom-or-killed", "medium", None),
    # Linux drivers/iommu/intel/dmar.c after a DMA fault storm (printk rate limit names the function)
    "dmar-fault-ratelimited": (
        "NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
        "kernel: dmar_fault: 24 callbacks suppressed\n",
        "gpu-p2p-broken", "high", None),
    # RCCL src/transport/p2p.cc and the hip IPC call it makes
    "rccl-hip-ipc-open-weak": (
        "NCCL WARN hipIpcOpenMemHandle failed : invalid argument\n",
        "gpu-p2p-broken", "low", None),
    # NCCL 2.3-2.11 src/transport/p2p.cc p2pSendConnect
    "nccl-failed-open-cuda-ipc-weak": (
        "node1:4242:4300 [1] transport/p2p.cu:431 NCCL WARN failed to open CUDA IPC handle : 30 "
        "unknown error\n",
        "gpu-p2p-broken", "low", None),
    # torch ProcessGroupNCCL WorkNCCL::synchronize with blocking wait (2.x wording, rank prefix)
    "nccl-blocking-wait-2x": (
        "[rank1]: RuntimeError: [PG ID 0 PG GUID 0(default_pg) Rank 1] Work WorkNCCL(SeqNum=5, "
        "OpType=ALLREDUCE, NumelIn=10, NumelOut=10, Timeout(ms)=600000) timed out in blocking "
        "wait (TORCH_NCCL_BLOCKING_WAIT=1).\n",
        "collective-timeout", "medium", 1),
    # torch 1.x wording
    "nccl-blocking-wait-1x": (
        "RuntimeError: [Rank 3] Work WorkNCCL(OpType=ALLREDUCE, TensorShape=[10], "
        "Timeout(ms)=60000) timed out in blocking wait (NCCL_BLOCKING_WAIT=1).\n",
        "collective-timeout", "medium", 3),
    # torch_npu ProcessGroupHCCL (copies ProcessGroupNCCL's abort message)
    "hccl-communicator-aborted": (
        "RuntimeError: HCCL communicator was aborted.\n",
        "collective-timeout", "medium", None),
    # c10d Work::wait(timeout) (libtorch_cpu string): weak
    "c10d-work-operation-timed-out-weak": (
        "RuntimeError: Operation timed out!\n",
        "collective-timeout", "low", None),
    # NCCL src/enqueue.cc: a self send with no matching recv (ranks' p2p sequences differ)
    "nccl-self-send-without-recv": (
        "node1:4242:4300 [0] enqueue.cc:1520 NCCL WARN Trying to send to self without a matching "
        "recv\n",
        "collective-mismatch", "high", None),
    # Open MPI rmaps help text: more cpus per process than the mapping object has
    "ompi-cpus-per-proc-less-cpus": (
        "--------------------------------------------------------------------------\n"
        "A request for multiple cpus-per-proc was given, but a directive\n"
        "was also give to map to an object level that has less cpus than\n"
        "requested ones:\n\n  #cpus-per-proc:  12\n  number of cpus:  6\n  map-by:          BYNUMA\n",
        "slurm-allocation-mismatch", "high", None),
    # Open MPI btl/tcp: a second interface/NAT made the handshake meet another process
    "ompi-unexpected-process-identifier": (
        "[node1][[4242,1],0][btl_tcp_endpoint.c:626:mca_btl_tcp_endpoint_recv_connect_ack] "
        "received unexpected process identifier [[4242,1],3]\n",
        "nccl-network", "high", None),
    "ompi-failed-tcp-connect": (
        "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\nshould not "
        "happen.\n",
        "nccl-network", "high", None),
    # torch ProcessGroupGloo createDeviceForHostname
    "gloo-cannot-resolve-local": (
        "RuntimeError: Cannot resolve node-7 to a (local) address\n",
        "nccl-network", "high", None),
    "gloo-loopback-fallback-weak": (
        "[W ProcessGroupGloo.cpp:715] Warning: Unable to resolve hostname to a (local) address. "
        "Using the loopback address as fallback. Manually set the network interface to bind to "
        "with GLOO_SOCKET_IFNAME. (function operator())\n",
        "nccl-network", "low", None),
    # Open MPI openib BTL
    "ompi-openfabrics-init-weak": (
        "WARNING: There was an error initializing an OpenFabrics device.\n\n  Local host:   node1\n"
        "  Local device: mlx5_0\n",
        "nccl-network", "low", None),
    # Ray's object store warning in a 64 MB container /dev/shm: weak
    "ray-dev-shm-small-weak": (
        "WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has only "
        "67108864 bytes available. This will harm performance! You may be able to free up space "
        "by deleting files in /dev/shm. If you are inside a Docker container, you can increase "
        "/dev/shm size by passing '--shm-size=10.24gb' to 'docker run'\n",
        "shm-bus-error", "low", None),
    # Open MPI errmgr / PRRTE: a node's daemon vanished
    "ompi-lost-remote-daemon": (
        "--------------------------------------------------------------------------\n"
        "ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[4242,0],0] on "
        "node node1\n",
        "peer-connection-closed", "medium", None),
    "prrte-lost-remote-daemon": (
        "PRTE has lost communication with a remote daemon.\n",
        "peer-connection-closed", "medium", None),
    # MPICH / Intel MPI Hydra proxy
    "hydra-assert-closed": (
        "[proxy:0:1@node2] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:887): assert "
        "(!closed) failed\n",
        "peer-connection-closed", "medium", None),
    # torch RPC over TensorPipe
    "tensorpipe-eof-weak": (
        "RuntimeError: EOF: end of file (this error originated at tensorpipe/transport/shm/"
        "connection_impl.cc:259)\n",
        "peer-connection-closed", "low", None),
    # SIGTERM as subprocess / spawn report it: weak (a launcher also SIGTERMs healthy workers)
    "subprocess-sigterm-weak": (
        "subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' died with "
        "<Signals.SIGTERM: 15>.\n",
        "stopped-externally", "low", None),
    # DeepSpeed launcher/launch.py sigkill_handler when the launcher itself got SIGTERM
    "deepspeed-main-process-sigterm": (
        "[2024-05-01 10:00:00,000] [INFO] [launch.py:251:sigkill_handler] Killing subprocess "
        "4242\n[2024-05-01 10:00:00,001] [INFO] [launch.py:262:sigkill_handler] Main process "
        "received SIGTERM, exiting\n",
        "stopped-externally", "high", None),
    # submitit (job_environment.py) on a preemption/timeout signal: weak
    "submitit-bypassing-signal-weak": (
        "submitit WARNING (2024-05-01 10:00:00,000) - Bypassing signal SIGTERM\n",
        "stopped-externally", "low", None),
    # pdsh / mpirun reaching the hosts over ssh: weak
    "ssh-host-key-weak": (
        "pdsh@node1: node2: Host key verification failed.\n"
        "pdsh@node1: node2: ssh exited with exit code 255\n",
        "rendezvous-timeout", "low", None),
    "ssh-publickey-weak": (
        "node2: Permission denied (publickey,password).\n",
        "rendezvous-timeout", "low", None),
    # MPICH / Intel MPI Hydra utils/sock/sock.c
    "hydra-unable-to-connect": (
        "[mpiexec@node1] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from "
        "\"node1\" to \"node2\" (No route to host)\n",
        "rendezvous-timeout", "medium", None),
    # torch c10d socket.cpp: this node's address has no name
    "c10d-client-hostname-weak": (
        "[W socket.cpp:464] [c10d] The hostname of the client socket cannot be retrieved. err=-3\n",
        "rendezvous-timeout", "low", None),
}

# A neighbouring category's message that the new strong patterns must not take:
# (log text, rule id the user should see, or None for no known cause)
NEGATIVE = {
    # a SIGTERM (stop) is not a SIGKILL
    "exit-code-is-143-not-oom": (
        "Container killed on request. Exit code is 143\n", None),
    "make-error-2-not-oom": (
        "make[2]: *** [CMakeFiles/ext.dir/build.make:76: ext.o] Error 2\n", None),
    "vertex-status-1-not-oom": (
        "ValueError: bad config\nThe replica workerpool0-0 exited with a non-zero status of 1. "
        "Termination reason: Error.\n", None),  # the job's error, then Vertex's status line
    "go-signal-terminated-not-oom": (
        "Error: exit status: signal: terminated\n", None),
    # an IOMMU boot line is no fault
    "dmar-boot-line-not-p2p": (
        "DMAR: IOMMU enabled\nDMAR: Host address width 46\n", None),
    # NCCL's INFO that a PCIe pair has no P2P (it then uses SHM) does not hide the real error
    "p2p-info-then-device-oom": (
        "node1:12:12 [0] NCCL INFO P2P is disabled between connected GPUs 1 and 0. You can "
        "repress this message with NCCL_IGNORE_DISABLED_P2P=1.\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
        "cuda-out-of-memory"),
    # a blocked connect to the store is the rendezvous, not a collective
    "client-socket-timeout-is-rendezvous": (
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800s while "
        "trying to connect to (10.0.0.1, 29500).\n", "rendezvous-timeout"),
    # Open MPI's slot shortage is the allocation, not the network
    "ompi-slots-not-network": (
        "There are not enough slots available in the system to satisfy the 8\nslots that were "
        "requested by the application:\n  python\n", "slurm-allocation-mismatch"),
    # ORTE failing to start daemons over ssh is reaching the hosts, not a peer closing
    "orte-start-daemons-not-peer": (
        "ORTE was unable to reliably start one or more daemons.\n", "rendezvous-timeout"),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEGATIVE)
