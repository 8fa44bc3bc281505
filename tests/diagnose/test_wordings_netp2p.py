"""Wordings of the network, P2P and shared-memory rules, from the code that prints them.

Each case is a short realistic log built around the real message (its source in a
comment); it asserts the rule, the confidence class the rule gives it and, where a
prefix names one, the rank. The negative cases are neighbouring categories' messages
that these rules must not take.
"""
# The logs are real messages, one line each as the tools print them (a wrapped line
# would test the unwrapping, not the wording): E501 does not apply to them.
# ruff: noqa: E501

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose

NCCL_TESTS_HEAD = """\
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0x17] NVIDIA GeForce RTX 3090
#  Rank  1 Group  0 Pid   4242 on     node01 device  1 [0x65] NVIDIA GeForce RTX 3090
#
"""

# (case id, log text, rule id or "" for no cause, confidence, rank or None)
CASES = [
    # ---- gpu-p2p-broken ----
    # nccl-tests src/util.cu (2.13+): the result header; the run hangs in the first size
    ("nccl-tests-hang-after-header", NCCL_TESTS_HEAD + """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
""", "gpu-p2p-broken", "low", None),
    # nccl-tests (2019-2021 src/common.cu): the header said "error" in its last column
    ("nccl-tests-old-error-header", """\
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    35.21    0.00    0.00  0e+00    34.98    0.00    0.00  0e+00
""", "gpu-p2p-broken", "low", None),
    # nccl-tests src/common.cu CheckData: printf("rank=%d #wrong=%d\n", ...) on bad results
    ("nccl-tests-wrong-elements", NCCL_TESTS_HEAD + """\
rank=1 #wrong=262144
     1048576        262144     float     sum      -1    98.12   10.69   10.69  262144    97.55   10.75   10.75  262144
""", "gpu-p2p-broken", "low", None),
    # RCCL src/init.cc: WARN at init when the environment lacks the fine-grain PCIe setting
    ("rccl-fine-grain-pcie-missing", """\
node01:1234:1234 [0] NCCL INFO ROCr version 1.1
node01:1234:1234 [0] NCCL WARN Missing "HSA_FORCE_FINE_GRAIN_PCIE=1" from environment which can lead to low RCCL performance, system instablity or hang!
""", "gpu-p2p-broken", "low", None),
    # cudaGetErrorString(cudaErrorNvlinkUncorrectable), CUDA runtime API error table
    ("cuda-nvlink-uncorrectable", """\
[rank3]: Traceback (most recent call last):
[rank3]:   File "train.py", line 88, in <module>
[rank3]:     dist.all_reduce(t)
[rank3]: RuntimeError: CUDA error: uncorrectable NVLink error was detected during the execution
""", "gpu-p2p-broken", "high", 3),
    # cuGetErrorName(CUDA_ERROR_TOO_MANY_PEERS), CUDA driver API
    ("cuda-too-many-peers", """\
RuntimeError: CUDA driver error: CUDA_ERROR_TOO_MANY_PEERS
""", "gpu-p2p-broken", "high", None),
    # cuda-samples Samples/0_Introduction/simpleP2P/simpleP2P.cu when no pair can peer
    ("simplep2p-not-available", """\
[./simpleP2P] - Starting...
Checking for multiple GPUs...
CUDA-capable device count: 2

Checking GPU(s) for support of peer to peer memory access...
Peer to Peer access is not available amongst GPUs in the system, waiving test.
""", "gpu-p2p-broken", "high", None),
    # the broken-P2P symptom of consumer cards: a direct copy to another GPU is zeros
    ("direct-copy-zeros", """\
>>> v = torch.randn(4, device='cuda:0')
>>> v.to('cuda:1')
tensor([0., 0., 0., 0.], device='cuda:1')
>>> v.cpu().to('cuda:1')
tensor([ 0.3364, -1.2100,  0.5512,  0.0934], device='cuda:1')
""", "gpu-p2p-broken", "low", None),
    # the reporter's own finding in an issue: disabling P2P makes the job run
    ("p2p-disable-works", """\
all_reduce_perf hangs between GPU0 and GPU1 (PXB), GPU2/GPU3 on the other socket work.
Setting NCCL_P2P_DISABLE=1 works but the bandwidth drops to 3 GB/s.
""", "gpu-p2p-broken", "low", None),
    # cuda-samples helper_cuda.h checkCudaErrors around cudaDeviceEnablePeerAccess: the driver
    # refused the peer mapping (simpleP2P)
    ("cuda-samples-enable-peer-access-failed", """\
Checking GPU(s) for support of peer to peer memory access...
> Peer access from NVIDIA GeForce RTX 4090 (GPU0) -> NVIDIA GeForce RTX 4090 (GPU1) : Yes
Enabling peer access between GPU0 and GPU1...
CUDA error at simpleP2P.cu:130 code=205(cudaErrorMapBufferObjectFailed) "cudaDeviceEnablePeerAccess(gpuid[1], 0)"
""", "gpu-p2p-broken", "high", None),
    # ---- nccl-network ----
    # NCCL src/misc/socket.cc ncclSocketInit: NCCL_SOCKET_IFNAME names no existing interface
    ("nccl-socket-family-garbage", """\
node01:77:77 [0] NCCL INFO Bootstrap : Using eth2:
node01:77:99 [0] misc/socket.cc:484 NCCL WARN ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor AF_INET6(10)
""", "nccl-network", "high", None),
    # NCCL 2.27+ src/os/linux.cc socketConnectCheck (funcName ncclOsSocketPollConnect)
    ("nccl-poll-connect-retry-count", """\
[rank1]:node02:512:601 [1] NCCL WARN ncclOsSocketPollConnect: connect to 10.0.0.1<46213> returned Connection refused, exceeded error retry count after 35 attempts
[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, remote process exited or there was a network error, NCCL version 2.27.3
""", "nccl-network", "high", 1),
    # NCCL 2.27+ src/os/linux.cc: the first connect attempt fails outright
    ("nccl-start-connect-failed", """\
node02:512:601 [1] NCCL WARN ncclOsSocketStartConnect: connect to 10.0.0.1<46213> failed : No route to host
""", "nccl-network", "high", None),
    # NCCL 2.19-2.26 src/misc/socket.cc: connect retries exhausted
    ("nccl-poll-connect-exceeded", """\
node02:512:601 [1] misc/socket.cc:567 NCCL WARN socketPollConnect: exceeded timeouts (35)
""", "nccl-network", "high", None),
    # gloo transport/tcp/pair.cc (torch third_party): a pair could not connect in time
    ("gloo-connect-timeout", """\
[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:233] Connect timeout [none]
""", "nccl-network", "high", 1),
    # oneCCL src/atl/ofi: the libfabric transport found no provider
    ("oneccl-atl-init", """\
2024:10:01-12:00:00:(1234) |CCL_ERROR| atl_ofi_helper.cpp:1118 fi_getinfo error: ret -61, providers 0
2024:10:01-12:00:00:(1234) |CCL_ERROR| atl_ofi_comm.cpp:232 init_transport: EXCEPTION: failed to initialize ATL
""", "nccl-network", "high", None),
    # the same exception alone does not say why the transport failed (weak)
    ("oneccl-atl-init-alone", """\
2024:10:01-12:00:00:(1234) |CCL_ERROR| atl_mpi_comm.cpp:120 init_transport: EXCEPTION: failed to initialize ATL
""", "nccl-network", "low", None),
    # ---- rendezvous-timeout (capped at medium) ----
    # torch c10d TCPStore.cpp (2.3+) connect/validate retry loop
    ("tcpstore-connect-validate", """\
torch.distributed.DistNetworkError: TCP client failed to connect/validate to host 10.0.0.1:29500 - timed out (try=0, timeout=1800000ms): The client socket has timed out after 1800000ms while trying to connect to (10.0.0.1, 29500).
""", "rendezvous-timeout", "medium", None),
    # torch c10d socket.cpp: the endpoint's host name does not resolve
    ("c10d-hostname-lookup", """\
[W socket.cpp:697] [c10d] Failed to look up the IP address for the hostname (master-node).
torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (master-node, 29500).
""", "rendezvous-timeout", "medium", None),
    # CPython on Windows: socket.gaierror from getaddrinfo (WSAHOST_NOT_FOUND)
    ("windows-getaddrinfo", """\
  File "C:\\Python311\\Lib\\socket.py", line 962, in getaddrinfo
socket.gaierror: [Errno 11001] getaddrinfo failed
""", "rendezvous-timeout", "medium", None),
    # libuv-backed c10d error fields (name/message from uv_err_name / uv_strerror)
    ("libuv-ehostunreach", """\
torch.distributed.DistNetworkError: The client socket has failed to connect. code: -113, name: EHOSTUNREACH, message: no route to host
""", "rendezvous-timeout", "medium", None),
    # Ray python/ray/_private/services.py: a worker node cannot reach the head
    ("ray-gcs-unreachable", """\
ConnectionError: Unable to connect to GCS (ray head) at 10.0.0.1:6379. Check that (1) Ray with matching version started successfully at the specified address, (2) this node can reach the specified address, and (3) there is no firewall setting preventing access.
""", "rendezvous-timeout", "medium", None),
    # OpenSSH client as pdsh starts DeepSpeed's ranks on the hostfile's nodes
    ("pdsh-ssh-timeout", """\
[2024-05-02 10:00:00,000] [INFO] [multinode_runner.py:80:get_cmd] Running on the following workers: worker-0,worker-1
worker-1: ssh: connect to host worker-1 port 22: Connection timed out
pdsh@worker-0: worker-1: ssh exited with exit code 255
""", "rendezvous-timeout", "medium", None),
    # PaddlePaddle phi/core/distributed/store/tcp_utils.cc tcp_connect / get_addr_info
    ("paddle-store-unreachable", """\
I1029 11:24:40.706755 14711 tcp_utils.cc:107] Retry to connect to 10.3.5.1:44264 while the server is not yet listening.
InvalidArgumentError: Network 10.3.5.1:44264 cannot be connected. (at /paddle/paddle/phi/core/distributed/store/tcp_utils.cc:148)
""", "rendezvous-timeout", "medium", None),
    ("paddle-store-unresolved", """\
InvalidArgumentError: IPv4 network master-0:6170 cannot be obtained. Details: Name or service not known. (at /paddle/paddle/phi/core/distributed/store/tcp_utils.cc:62)
""", "rendezvous-timeout", "medium", None),
    # ---- address-in-use ----
    # Ray python/ray/_private/parameter.py: a component's port is taken
    ("ray-port-used", """\
ValueError: Ray component worker_ports is trying to use a port number 10002 that is used by other components.
""", "address-in-use", "high", None),
    # Windows WSAEACCES on bind: the port is in an excluded (Hyper-V/WSL) range
    ("windows-10013", """\
[rank0]: OSError: [WinError 10013] An attempt was made to access a socket in a way forbidden by its access permissions
""", "address-in-use", "low", 0),
    # gRPC chttp2_server.cc: no listening address could be bound (coordination service)
    ("grpc-no-address-added", """\
E0101 12:00:00.000000 1234 server_chttp2.cc:40] {"created":"@1700000000.0","description":"No address added out of total 1 resolved","file":"src/core/ext/transport/chttp2/server/chttp2_server.cc"}
""", "address-in-use", "low", None),
    # torch c10d socket.cpp on Windows (WSAEADDRINUSE)
    ("windows-c10d-errno-10048", """\
[W socket.cpp:663] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 10048 - Only one usage of each socket address (protocol/network address/port) is normally permitted.).
""", "address-in-use", "high", None),
    # PaddlePaddle tcp_utils.cc tcp_listen: the bind failed (the reason is not printed: weak)
    ("paddle-bind-failed", """\
InvalidArgumentError: Bind network on IP_ANY:6170 failed. (at /paddle/paddle/phi/core/distributed/store/tcp_utils.cc:181)
""", "address-in-use", "low", None),
    # ---- libuv-missing ----
    # torch c10d TCPStore.cpp (2.4+; "built" since 2.5, "build" before)
    ("libuv-built", """\
torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without libuv support, run with USE_LIBUV=0 to disable it.
""", "libuv-missing", "high", None),
    # ---- shm-bus-error ----
    # NCCL src/os/linux.cc (2.2x+): mkstemp in /dev/shm failed
    ("nccl-shm-file", """\
node01:55:90 [0] NCCL WARN Error: failed to create shared memory file /dev/shm/nccl-XXXXXX, error No space left on device (28)
""", "shm-bus-error", "high", None),
    # NCCL src/misc/shmutils.cc (2.18-2.26): mmap of the segment failed
    ("nccl-shm-map", """\
node01:55:90 [0] NCCL WARN Error: Could not map /dev/shm/nccl-a1B2c3 size 9637888, error: Cannot allocate memory
""", "shm-bus-error", "high", None),
    # PaddlePaddle paddle/fluid/imperative/data_loader.cc SIGBUS handler
    ("paddle-bus-error", """\
ERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by insufficient shared memory (shm), please check whether use_shared_memory is set and storage space in /dev/shm is enough
""", "shm-bus-error", "high", None),
    # CPython OSError naming the file (multiprocessing.shared_memory, SharedArray)
    ("python-enospc-dev-shm", """\
[rank2]:   File "/usr/lib/python3.10/multiprocessing/shared_memory.py", line 115, in __init__
[rank2]: OSError: [Errno 28] No space left on device: '/dev/shm/psm_4f2a1b'
""", "shm-bus-error", "high", 2),
    # torch torch/lib/libshm (torch_shm_manager): the segment could not be created
    ("torch-shm-manager", """\
RuntimeError: Couldn't allocate shared memory segment: No space left on device
""", "shm-bus-error", "high", None),
    # torch aten/src/ATen/MapAllocator.cpp: mmap of a worker's shared file (weak)
    ("torch-mmap-shared-file", """\
RuntimeError: unable to mmap 1048576 bytes from file </torch_1234_2345678901_0>: Cannot allocate memory (12)
""", "shm-bus-error", "low", None),
    # ---- negatives: neighbouring categories keep their verdict ----
    # nccl-tests failing at init (no result header): not P2P
    ("neg-nccl-tests-init-failure", NCCL_TESTS_HEAD + """\
node01: Test NCCL failure common.cu:1005 'unhandled system error / '
""", "nccl-network", "low", None),
    # an InfiniBand completion error after the nccl-tests header: the network's
    ("neg-nccl-tests-ib-error", NCCL_TESTS_HEAD + """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
node01:4242:4250 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<40201> with error 12, opcode 0, len 0, vendor err 129
""", "nccl-network", "high", None),
    # zeros on cuda:0 (a fresh torch.zeros) say nothing about P2P
    ("neg-zeros-on-device-0", """\
tensor([0., 0., 0., 0.], device='cuda:0')
""", "", None, None),
    # a workaround the reporter tried without success is no finding
    ("neg-p2p-disable-did-not-help", """\
all_reduce_perf hangs on the two nodes.
Setting NCCL_P2P_DISABLE=1 did not help, NCCL_P2P_DISABLE=1 doesn't work either.
""", "", None, None),
    # NCCL's env echo of a P2P setting is not the reporter's finding
    ("neg-p2p-disable-env-echo", """\
node01:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
node01:1:1 [0] NCCL WARN Call to ibv_create_qp failed
""", "nccl-network", "high", None),
    # a closed socket is a peer's death, not the network's
    ("neg-socket-closed-by-peer", """\
node01:1:9 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node02<45678>
""", "peer-connection-closed", "medium", None),
    # a port taken is address-in-use, not a rendezvous problem
    ("neg-eaddrinuse-not-rendezvous", """\
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
""", "address-in-use", "high", None),
    # a model download from a node without internet is not a rendezvous problem
    ("neg-hub-download-unreachable", """\
requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: /bert-base-uncased/resolve/main/config.json (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a>: Failed to establish a new connection: [Errno 101] Network is unreachable'))
""", "", None, None),
    # a full checkpoint disk is not /dev/shm
    ("neg-enospc-not-shm", """\
OSError: [Errno 28] No space left on device: '/data/ckpt/model-00001.safetensors'
""", "", None, None),
]


@pytest.mark.parametrize(("text", "rule", "confidence", "rank"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_wording(tmp_path: Path, text: str, rule: str, confidence: str | None,
                 rank: int | None) -> None:
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    result = diagnose([log])
    got = result.causes[0].rule.id if result.causes else ""
    assert got == rule, [(c.rule.id, c.confidence, [h.text for h in c.evidence])
                         for c in result.causes]
    assert result.confidence == confidence
    if rank is not None:
        assert result.causes[0].rank == rank
