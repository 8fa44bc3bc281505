"""Wordings of the Ascend/HCCL, DataLoader, DDP, process-group, JAX, libuv, wandb and framework-init
rules (rule writer rC9).

Each log is short and built around the real message; the comment names where the message comes
from. Assertions are what the user sees: the rule, how sure, the rank. The negative cases are a
neighbouring category's message that the new patterns must not take.
"""

from __future__ import annotations

from tests.diagnose.wording import wording_tests

# (log text, rule id, confidence, rank or None)
CASES = {
    # torch_npu csrc/core/npu/NPUException.cpp formatErrorCode (SubModule DIST, ErrCode::HCCL), copied
    # from a CI log viewer that turned the code into a line link; the HCCL init line is cut off above
    "npu-dist-call-hccl-api-failed": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 88, in <module>\n"
        "    dist.barrier()\n"
        "[ERROR] 2025-06-17-06:11:33 (PID:10233, Device:2, RankID:-1) "
        "ERR0[220](https://github.com/org/repo/actions/runs/1/job/2#step:10:222)0 DIST call hccl api "
        "failed.\n",
        "ascend-hccl", "medium", None),
    # CANN 8 HCCL error code with its type name, under a torchrun rank prefix
    "cann8-communication-error-name": (
        "[rank3]: RuntimeError: create_config:torch_npu/csrc/distributed/HCCLUtils.cpp:140 \n"
        "[rank3]: [PID: 237] 2025-10-09-08:38:04.978.003 Communication_Error_Ranktable_Detect(EI0015): "
        "Failed to collect cluster information of the communicator based on rootInfo detection.\n",
        "ascend-hccl", "medium", 3),
    # torch_npu 1.x csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp Initialize: the NPU could not be set up
    # (ACL 507033, a previous process still holds it)
    "npu-old-507033": (
        "RuntimeError: Initialize:/home/user/PyTorch/torch_npu/csrc/core/npu/sys_ctrl/npu_sys_ctrl.cpp:97 "
        "NPU error, error code is 507033\n"
        "EL0003: The argument is invalid.\n"
        "        Solution: Try again with a valid argument.\n",
        "ascend-hccl", "medium", None),
    # ACL's text for the same error, under torch.npu.set_device
    "npu-failed-to-start-device": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 30, in <module>\n"
        "    torch.npu.set_device(local_rank)\n"
        "RuntimeError: ExchangeDevice: NPU function error\n"
        "[Error]: Failed to start the device.\n"
        "        Rectify the fault based on the error information in the ascend log.\n",
        "ascend-hccl", "medium", None),
    # CANN's device-side launcher (TSD)
    "npu-tsdopen-failed": (
        "E39999: Inner Error!\n"
        "        TsdOpen failed. devId=7, tdt error=1\n",
        "ascend-hccl", "medium", None),
    "npu-e39-subprocess-timeout": (
        "Inner_Error_Device_Subprocess_Startup_Timeout(E39007)\n"
        "        Possible Cause: 1.Failed to start the subprocess. 2. The HDC link is faulty.\n",
        "ascend-hccl", "medium", None),
    # Paddle python/paddle/io/dataloader/dataloader_iter.py _get_data
    "paddle-dataloader-workers-exit": (
        "Traceback (most recent call last):\n"
        "  File \"tools/train.py\", line 120, in main\n"
        "    for batch in loader:\n"
        "RuntimeError: DataLoader 2 workers exit unexpectedly, pids: 4242, 4243\n",
        "dataloader-worker-killed", "medium", None),
    # Paddle 1.x fluid reader.py (already known: the pid-first wording)
    "paddle-fluid-dataloader-process-exited": (
        "SystemError: (Fatal) DataLoader process (pid 4242) exited unexpectedly with code 9. Error "
        "detailed are lost due to multiprocessing. Rerunning with DataLoader.from_generator(..., "
        "use_multiprocess=False) may give better error trace.\n",
        "dataloader-worker-killed", "medium", None),
    # Paddle paddle/fluid/distributed/collective/reducer.cc EagerReducer::MarkVarReady
    "paddle-reducer-ready-before": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 210, in <module>\n"
        "    loss.backward()\n"
        "RuntimeError: (PreconditionNotMet) Error happened, when parameter[12][linear_3.w_0] has been "
        "ready before. Please set find_unused_parameters=True to traverse backward graph in each step "
        "to prepare reduce in advance. If you have set, there may be several reasons for this error: "
        "1) In multiple reentrant backward phase, some parameters are reused.\n"
        "  [Hint: Expected has_marked_unused_vars_ == false, but received has_marked_unused_vars_:1 "
        "!= false:0.] (at /paddle/paddle/fluid/distributed/collective/reducer.cc:848)\n",
        "ddp-unused-parameters", "high", None),
    # the same message cut by a terminal after "ready before."
    "paddle-reducer-cut": (
        "RuntimeError: (PreconditionNotMet) Error happened, when parameter[0][conv2d_0.w_0] has been\n"
        "some other line\n"
        "Please set find_unused_parameters=True to traverse backward graph in each step to prepare "
        "reduce in advance.\n",
        "ddp-unused-parameters", "high", None),
    # DeepSpeed runtime/sequence_parallel/parallel_state_sp.py
    "deepspeed-sequence-parallel-group": (
        "Traceback (most recent call last):\n"
        "  File \"deepspeed/runtime/sequence_parallel/parallel_state_sp.py\", line 71, in "
        "get_sequence_parallel_group\n"
        "AssertionError: sequence parallel group is not initialized\n",
        "default-pg-not-initialized", "high", None),
    # DeepSpeed linear/optimized_linear.py
    "deepspeed-torch-distributed-not-initialized": (
        "AssertionError: attempting to use optimized linear base weight sharding but "
        "torch-distributed is not initialized, please init first.\n",
        "default-pg-not-initialized", "high", None),
    # DeepSpeed compile/profilers/graph_profile.py
    "deepspeed-distributed-environment": (
        "AssertionError: Distributed environment is not initialized but comm operator all_reduce "
        "c10d_functional.all_reduce is used.\n",
        "default-pg-not-initialized", "high", None),
    # torch 1.1-1.7 SyncBatchNorm.forward, one GPU without a launcher
    "torch17-syncbn-only-within-ddp": (
        "  File \"/opt/conda/lib/python3.8/site-packages/torch/nn/modules/batchnorm.py\", line 519, "
        "in forward\n"
        "    raise AttributeError('SyncBatchNorm is only supported within "
        "torch.nn.parallel.DistributedDataParallel')\n"
        "AttributeError: SyncBatchNorm is only supported within "
        "torch.nn.parallel.DistributedDataParallel\n",
        "default-pg-not-initialized", "high", None),
    # Paddle python/paddle/distributed/parallel.py DataParallel.__init__ without init_parallel_env
    "paddle-parallel-context": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 61, in <module>\n"
        "    model = paddle.DataParallel(model)\n"
        "AssertionError: ParallelContext must be initialized before. You should use init_parallel_env() "
        "beforeconstructing the DataParallel.\n",
        "default-pg-not-initialized", "high", None),
    # xla/pjrt/distributed/topology_util.cc BuildGlobalTopology: two processes with one process_id
    "jax-same-process-id": (
        "jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: GlobalTopologyProto contains multiple "
        "processes with the same process ID 0\n",
        "jax-coordination", "medium", None),
    # jax/_src/clusters/cloud_tpu_cluster.py
    "jax-tpu-coordinator-address": (
        "RuntimeError: Failed to recognize coordinator address 10.130.0.7:8476\n",
        "jax-coordination", "medium", None),
    # jax/_src/clusters/ompi_cluster.py
    "jax-ompi-coordinator": (
        "RuntimeError: Could not parse coordinator IP address from Open MPI environment.\n",
        "jax-coordination", "medium", None),
    # xla/tsl coordination_service_agent.cc registration retry, alone in a log that then stops
    "jax-agent-register-retry": (
        "W0312 10:11:12.000000 1234 coordination_service_agent.cc:420] Coordination service agent "
        "failed to register with the leader (attempt #4, will try again after 8s, deadline is "
        "2025-03-12T10:21:12, now is 2025-03-12T10:11:12,total timeout is 10m). Error status: "
        "UNAVAILABLE: DNS resolution failed for coordinator-0:8476\n",
        "jax-coordination", "low", None),
    # xla/tsl coordination_service_agent.cc: the leader (process 0) restarted
    "jax-leader-incarnation-mismatch": (
        "jaxlib.xla_extension.XlaRuntimeError: ABORTED: Leader incarnation ID mismatch: the "
        "coordination  leader (usually slice 0 task 0) has restarted. Check for earlier errors or "
        "any scheduler events (e.g. preemption, eviction) to debug further.\n",
        "jax-task-died", "medium", None),
    # xla/tsl coordination_service.cc: a task came back after a crash
    "jax-task-restarted": (
        "E0312 10:11:12.000000 1234 coordination_service.cc:901] ABORTED: Task "
        "/job:jax_worker/replica:0/task:3 (incarnation 77) has restarted. The task has restarted and "
        "likely crashed earlier - check for any earlier errors or any scheduler events (e.g. "
        "preemption, eviction) to debug further.\n",
        "jax-task-died", "medium", None),
    # xla/pjrt/distributed/client.cc (jaxlib 0.3-0.4.1x), cut by a terminal after its first sentence
    "jax-old-client-missing-heartbeats": (
        "F0312 10:11:12.000000 1234 client.cc:402] Terminating process because the coordinator "
        "detected missing heartbeats.\n"
        "*** Check failure stack trace: ***\n",
        "jax-task-died", "medium", None),
    "jax-service-shut-down": (
        "FAILED_PRECONDITION: Barrier requested after coordination service has shut down.\n",
        "jax-task-died", "medium", None),
    "jax-all-tasks-set-to-error": (
        "INTERNAL: All tasks were set to error because coordination service encountered an error, but "
        "was unable to inform clients. Error: CANCELLED: RPC cancelled\n",
        "jax-task-died", "medium", None),
    "jax-heartbeat-not-registered": (
        "ABORTED: Task /job:jax_worker/replica:0/task:2 must be registered before sending heartbeat "
        "messages. The service might have restarted, please restart / reset and register again.\n",
        "jax-task-died", "medium", None),
    "jax-barrier-task-in-error": (
        "FAILED_PRECONDITION: Task (/job:jax_worker/replica:0/task:1) is already in error before the "
        "barrier was called. Barrier Id: PjRT_Client_Connect\n",
        "jax-task-died", "medium", None),
    # torch/csrc/distributed/c10d/TCPStore.cpp: a paste that cut the line before its advice
    "libuv-advice-only": (
        "[rank0]: torch.distributed.DistStoreError: use_libuv was requested but PyTorch was build "
        "without libuv sup\n"
        "[rank1]: loading checkpoint shards: 100%\n"
        "[rank1]: loading tokenizer\n"
        "[rank1]: building optimizer\n"
        "[rank0]: port, run with USE_LIBUV=0 to disable it.\n",
        "libuv-missing", "high", None),
    # wandb sdk/lib/wbauth/validation.py, printed by prompt.py as a term error
    "wandb-key-length-new": (
        "wandb: ERROR Invalid API key: API key must have 40+ characters, has 32.\n",
        "wandb-login", "high", None),
    "wandb-key-charset": (
        "wandb: ERROR Invalid API key: API key may only contain the letters A-Z, digits and "
        "underscores.\n",
        "wandb-login", "high", None),
    # wandb sdk/lib/wbauth/authenticate.py: the key in the environment is refused
    "wandb-env-key-invalid": (
        "[rank0]: wandb.errors.errors.AuthenticationError: WANDB_API_KEY invalid: API key is "
        "empty.\n",
        "wandb-login", "high", 0),
    # wandb sdk/lib/wbauth/prompt.py: a rank with a terminal waits at the new login prompt, the job
    # hangs there (no error line)
    "wandb-new-prompt-hang": (
        "wandb: Logging into https://api.wandb.ai. (Learn how to deploy a W&B server locally: "
        "https://wandb.me/wandb-server)\n"
        "wandb: Create a new API key at: https://wandb.ai/authorize?ref=models\n"
        "wandb: Store your API key securely and do not share it.\n"
        "wandb: Paste your API key and hit enter: \n",
        "wandb-login", "low", None),
    # BasicSR basicsr/utils/dist_util.py _init_dist_pytorch (MMCV's init code) without a GPU: the
    # frames and the set_device line already name it (a regression guard, no new wording)
    "basicsr-init-dist-no-driver": (
        "Traceback (most recent call last):\n"
        "  File \"basicsr/train.py\", line 215, in <module>\n"
        "    train_pipeline(root_path)\n"
        "  File \"/work/BasicSR/basicsr/utils/dist_util.py\", line 14, in init_dist\n"
        "    _init_dist_pytorch(backend, **kwargs)\n"
        "  File \"/work/BasicSR/basicsr/utils/dist_util.py\", line 24, in _init_dist_pytorch\n"
        "    torch.cuda.set_device(rank % num_gpus)\n"
        "ZeroDivisionError: integer division or modulo by zero\n",
        "framework-cuda-only-init", "high", None),
}

# (log text, the rule that must name it instead, or None for no known cause)
NEGATIVE = {
    # an AI Core operator fault (EZ9999 Inner Error) is a kernel error, not device setup or HCCL
    "npu-aicore-inner-error": (
        "RuntimeError: The Inner error is reported as above. The process exits for this inner error, "
        "and the current working operator name is aclnnMatmul.\n"
        "EZ9999: Inner Error!\n"
        "EZ9999: [PID: 4242] 2025-01-01-00:00:00.000.000 The error from device(chipId:0, dieId:0), "
        "serial number is 5, there is an aivec error exception, core id is 12, error code = 0x800000\n",
        None),
    # torch_npu out of memory with its PTA error code: device memory, not HCCL
    "npu-oom-not-hccl": (
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; "
        "58.10 GiB already allocated; 58.10 GiB current active; 1.20 GiB free; 59.00 GiB reserved in "
        "total by PyTorch)\n",
        "cuda-out-of-memory"),
    # torch: a worker killed by a bus error is the shared-memory limit, not the generic worker death
    "dataloader-bus-error-is-shm": (
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible "
        "that dataloader's workers are out of shared memory. Please try to raise your shared memory "
        "limit.\n",
        "shm-bus-error"),
    # torch reducer.cpp's warning that find_unused_parameters was not needed, then a real OOM
    "ddp-find-unused-warning-then-oom": (
        "[W reducer.cpp:1300] Warning: find_unused_parameters=True was specified in DDP constructor, "
        "but did not find any unused parameters in the forward pass. This flag results in an extra "
        "traversal of the autograd graph every iteration,  which can adversely affect performance.\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.10 GiB of which 1.02 GiB is free.\n",
        "cuda-out-of-memory"),
    # torch >= 1.8 SyncBatchNorm on a CPU tensor: not a missing process group
    "syncbn-cpu-tensor": (
        "ValueError: SyncBatchNorm expected input tensor to be on GPU or privateuseone\n",
        None),
    # torch.distributed.rpc not initialised is RPC's own setup, not the process group
    "rpc-not-initialized": (
        "RuntimeError: RPC has not been initialized. Call torch.distributed.rpc.init_rpc first.\n",
        None),
    # a real cause before the JAX service's report of it
    "jax-oom-then-all-tasks-error": (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 17179869184 bytes.\n"
        "INTERNAL: All tasks were set to error because coordination service encountered an error, but "
        "was unable to inform clients.\n",
        "cuda-out-of-memory"),
    # the JAX service's report alone is a consequence: the coordination rule must not take it
    "jax-task-died-not-coordination": (
        "ABORTED: Leader incarnation ID mismatch: the coordination  leader (usually slice 0 task 0) "
        "has restarted.\n",
        "jax-task-died"),
    # TCPStore's port in use is not libuv
    "tcpstore-port-in-use": (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
        "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
        "already in use\n",
        "address-in-use"),
    # another service's API key error is not wandb's login
    "openai-api-key": (
        "openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key "
        "provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.'"
        "}}\n",
        None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEGATIVE)
