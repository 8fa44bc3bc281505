"""Wordings of the memory, config, code, checkpoint, tooling and scheduler rules, from their sources.

Each case is a short realistic log built around the real message; the comment says where
the message comes from. A case asserts the rule, the confidence class the rule is meant to
give (high for a strong signature, medium where the rule caps it, low for a weak wording)
and, where a prefix names it, the rank. Negative cases are neighbouring categories' messages
that must not be taken by these rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _diagnose

from distrun.diagnose import diagnose

TRACE = "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n    main()\n"

# (log text, rule id, confidence, rank or None)
CASES: list[tuple[str, str, str, int | None]] = [
    # --- cuda-out-of-memory -------------------------------------------------------------
    # NCCL >= 2.19 src/include/checks.h CUDACHECK: WARN("Cuda failure %d '%s'", err, cudaGetErrorString(err))
    ("node1:412:412 [3] NCCL INFO Channel 00/0 : 3[3] -> 0[0] via P2P/IPC\n"
     "[rank3]: node1:412:530 [3] enqueue.cc:1556 NCCL WARN Cuda failure 2 'out of memory'\n"
     "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
     "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n",
     "cuda-out-of-memory", "high", 3),
    # nccl-tests src/common.h CUDACHECK: "%s: Test CUDA failure %s:%d '%s'"
    ("# nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5\n"
     "gpu-07: Test CUDA failure common.cu:892 'out of memory'\n"
     " .. gpu-07 pid 3311: Test failure common.cu:842\n",
     "cuda-out-of-memory", "high", None),
    # rccl-tests (HIP build of the same macro): "Test HIP failure ... 'out of memory'"
    ("mi250-2: Test HIP failure common.cu:901 'out of memory'\n",
     "cuda-out-of-memory", "high", None),
    # torch <= 0.4 THC: "cuda runtime error (2) : out of memory at .../THCCachingAllocator.cpp"
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 : out of memory\n"
     + TRACE +
     "RuntimeError: cuda runtime error (2) : out of memory at "
     "/pytorch/aten/src/THC/generic/THCStorage.cu:58\n",
     "cuda-out-of-memory", "high", None),
    # Caffe include/caffe/util/device_alternate.hpp CUDA_CHECK
    ("F0312 10:11:12.123456  4242 syncedmem.cpp:56] Check failed: error == cudaSuccess "
     "(2 vs. 0)  out of memory\n"
     "*** Check failure stack trace: ***\n",
     "cuda-out-of-memory", "high", None),
    # MXNet src/storage/gpu_device_storage.h and Darknet src/cuda.c check_error
    ("[10:11:12] src/storage/./pooled_storage_manager.h:157: cudaMalloc failed: out of memory\n"
     "mxnet.base.MXNetError: [10:11:12] src/engine/./threaded_engine.h:379: CUDA: out of memory\n",
     "cuda-out-of-memory", "high", None),
    ("CUDA Error: out of memory\ndarknet: ./src/cuda.c:36: check_error: Assertion `0' failed.\n",
     "cuda-out-of-memory", "high", None),
    # cuSOLVER / cuFFT / rocBLAS status names (cusolver_common.h, cufft.h, rocblas-types.h)
    ("RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling `cusolverDnCreate(handle)`\n",
     "cuda-out-of-memory", "high", None),
    ("RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED\n", "cuda-out-of-memory", "high", None),
    ("rocBLAS error: rocblas_status_memory_error when calling rocblas_sgemm\n",
     "cuda-out-of-memory", "high", None),
    # PaddlePaddle paddle/fluid/memory/allocation/allocator_facade: ResourceExhaustedError
    ("ResourceExhaustedError:\n\nOut of memory error on GPU 0. Cannot allocate 1.2GB memory on GPU 0, "
     "7.9GB memory has been allocated and available memory is only 88.0MB.\n",
     "cuda-out-of-memory", "high", None),
    # cupy/cuda/memory.pyx OutOfMemoryError
    ("cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 bytes "
     "(allocated so far: 15,032,385,536 bytes).\n",
     "cuda-out-of-memory", "high", None),
    # XLA TPU compiler's HBM reservation error
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Attempting to reserve 12.50G at the "
     "bottom of memory. That was not possible. There are 10.37G free, 0B reserved, and 10.37G reservable.\n",
     "cuda-out-of-memory", "high", None),
    # torch_musa / Gaudi / Ascend wordings of the same failure
    ("torch.musa.OutOfMemoryError: MUSA out of memory. Tried to allocate 2.00 GiB\n",
     "cuda-out-of-memory", "high", None),
    ("RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::268435456 (256)MB\n",
     "cuda-out-of-memory", "high", None),
    ("[rank1]: RuntimeError: [PID: 7781] 2024-05-10-07:28:04.417.845 Memory_Allocation_Failure(EL0004): "
     "Failed to allocate memory requested by GE module.\n"
     "[rank1]:         Possible Cause: Available memory is insufficient.\n"
     "[rank1]:         Call rtMalloc fail, purpose: page caching, type = 2, size:3221291008, device_id:0\n",
     "cuda-out-of-memory", "high", 1),

    # --- host-oom-or-killed (capped at medium) ---------------------------------------------
    # kernel mm/oom_kill.c __oom_kill_process report
    ("[Fri May 10 07:28:04 2024] Killed process 4242 (python), total-vm:98765432kB, "
     "anon-rss:65432100kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:131072kB oom_score_adj:0\n",
     "host-oom-or-killed", "medium", None),
    # systemd service manager (src/core/service.c)
    ("trainer.service: Main process exited, code=killed, status=9/KILL\n"
     "trainer.service: Failed with result 'signal'.\n",
     "host-oom-or-killed", "medium", None),
    # MPICH Hydra pm/pmiserv termination banner
    ("===================================================================================\n"
     "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
     "=   PID 4242 RUNNING AT node3\n"
     "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)\n",
     "host-oom-or-killed", "medium", None),
    # ray/exceptions.py OutOfMemoryError raised by the memory monitor
    ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
     "Memory on the node (IP: 10.0.0.3, ID: 0f1e) where the task was running was 60.1GB / 62.8GB (0.957)\n",
     "host-oom-or-killed", "medium", None),
    # Slurm slurmstepd task/cgroup plugin, two versions
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. "
     "Some of the step tasks have been OOM Killed.\n"
     "srun: error: gpu12: task 0: Out Of Memory\n",
     "host-oom-or-killed", "medium", 0),
    ("slurmstepd: error: Detected 3 oom-kill event(s) in step 4242.batch cgroup. "
     "Some of your processes may have been killed by the cgroup out-of-memory handler.\n",
     "host-oom-or-killed", "medium", None),
    # torchelastic summary of a SIGKILLed worker (torch/distributed/elastic/multiprocessing/errors)
    ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 "
     "(pid: 4243) of binary: /usr/bin/python3\n",
     "host-oom-or-killed", "medium", 1),
    # HTCondor condor_starter hold reason (src/condor_starter.V6.1; the Docker variant says "Mb")
    ("Job 4242.0 held: Error from slot1@node3: Job has gone over memory limit of 2048 megabytes. "
     "Peak usage: 2100 megabytes.\n", "host-oom-or-killed", "medium", None),
    ("Docker job has gone over memory limit of 2000 Mb, going on hold\n",
     "host-oom-or-killed", "medium", None),
    # Kubernetes container status
    ("    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n",
     "host-oom-or-killed", "medium", None),

    # --- dataloader-worker-killed (capped at medium) ---------------------------------------
    # torch/utils/data/_utils/signal_handling.py and dataloader.py
    ("[rank2]: RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.\n",
     "dataloader-worker-killed", "medium", 2),
    ("RuntimeError: DataLoader worker (pid(s) 4242, 4243) exited unexpectedly\n",
     "dataloader-worker-killed", "medium", None),
    ("RuntimeError: DataLoader worker (pid 4242) exited unexpectedly with exit code 1. Details are "
     "lost due to multiprocessing. Rerunning with num_workers=0 may give better error trace.\n",
     "dataloader-worker-killed", "medium", None),
    ("ERROR: Unexpected segmentation fault encountered in worker.\n",
     "dataloader-worker-killed", "medium", None),

    # --- world-size-mismatch ----------------------------------------------------------------
    # transformers/integrations/deepspeed.py trainer_config_finalize
    ("ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments "
     "values:\n- ds train_batch_size=256 vs hf train_batch_size (calculated)=64\n",
     "world-size-mismatch", "high", None),
    # Megatron-LM megatron/core/parallel_state.py initialize_model_parallel
    ("[rank0]: RuntimeError: world_size (6) is not divisible by tensor_model_parallel_size (4) x "
     "pipeline_model_parallel_size (1) x context_parallel_size (1)\n",
     "world-size-mismatch", "high", 0),
    # torch/distributed/device_mesh.py
    ("RuntimeError: Mesh should not be bigger than default world size 4, but found 8 ranks!\n",
     "world-size-mismatch", "high", None),

    # lightning_fabric/plugins/environments/torchelastic.py validate_settings
    ("ValueError: You set `devices=4` and `num_nodes=2` in Lightning, but the product (4 * 2) does not "
     "match the world size (4).\n", "world-size-mismatch", "high", None),

    # --- default-pg-not-initialized ---------------------------------------------------------
    # deepspeed/comm/comm.py init (dist_init_required=False without an initialised backend)
    ("AssertionError: Distributed backend is not initialized. Please set dist_init_required to True "
     "or initialize before calling deepspeed.initialize()\n",
     "default-pg-not-initialized", "high", None),
    # deepspeed/utils/groups.py
    ("AssertionError: dist is not initialized\n", "default-pg-not-initialized", "high", None),
    # torch/distributed/distributed_c10d.py _get_default_group (current and older wordings)
    ("ValueError: Default process group has not been initialized, please make sure to call "
     "init_process_group.\n", "default-pg-not-initialized", "high", None),
    ("AssertionError: Default process group is not initialized\n",
     "default-pg-not-initialized", "high", None),

    # horovod/common/basics.py
    ("ValueError: Horovod has not been initialized; use hvd.init().\n",
     "default-pg-not-initialized", "high", None),

    # --- ddp-unused-parameters --------------------------------------------------------------
    # torch/csrc/distributed/c10d/reducer.cpp (static_graph=True variant)
    ("[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before "
     "starting a new one. This error indicates that your training graph has changed in this "
     "iteration, e.g., one parameter is used in first iteration, but then got unused in the second "
     "iteration. this is not compatible with static_graph set to True.\n",
     "ddp-unused-parameters", "high", 1),
    ("Your training graph has changed in this iteration, e.g., one parameter is unused in first "
     "iteration, but then got used in the second iteration. this is not compatible with "
     "static_graph set to True.\n", "ddp-unused-parameters", "high", None),
    # reducer.cpp with TORCH_DISTRIBUTED_DEBUG=DETAIL
    ("Parameters which did not receive grad for rank 0: head.bias, head.weight\n",
     "ddp-unused-parameters", "high", None),
    # reducer.cpp, find_unused_parameters=True already on
    ("Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` "
     "outputs participate in computing loss. You can fix this by making sure all `forward` function "
     "outputs participate in calculating loss.\n", "ddp-unused-parameters", "high", None),
    # DeepSpeed runtime/zero/stage_1_and_2.py (printed over several lines)
    ("AssertionError: \n                        This assert indicates that your module has parameters that\n"
     "                        were not used in producing loss.\n"
     "                        You can avoid this assert by\n"
     "                        (1) enable ignore_unused_parameters option in zero_optimization config;\n",
     "ddp-unused-parameters", "high", None),
    ("AssertionError: The parameter 231 has already been reduced.             Gradient computed "
     "twice for this partition.             Multiple gradient reductions are currently not supported\n",
     "ddp-unused-parameters", "high", None),
    # lightning pytorch_lightning/strategies/ddp.py
    ("RuntimeError: It looks like your LightningModule has parameters that were not used in "
     "producing the loss returned\nby training_step. If this is intentional, you must enable the "
     "detection of unused parameters in DDP,\n", "ddp-unused-parameters", "high", None),

    # --- checkpoint-layout-mismatch ---------------------------------------------------------
    ("RuntimeError: The world size of the checkpoint (8) does not match the current world size (16)\n",
     "checkpoint-layout-mismatch", "high", None),
    ("ValueError: checkpoint was sharded for world_size 8, current world_size 16 mismatch\n",
     "checkpoint-layout-mismatch", "high", None),
    # deepspeed/runtime/zero/stage_1_and_2.py _load_universal / load_state_dict
    ("RuntimeError: The ZeRO checkpoint parameter-alignment layout does not match the current "
     "optimizer partitioning.\n", "checkpoint-layout-mismatch", "high", None),

    # --- wandb-login ------------------------------------------------------------------------
    # wandb/errors (module path wandb.errors.error in 0.10-0.12)
    ("wandb.errors.error.UsageError: api_key not configured (no-tty). call wandb.login(key=[your_api_key])\n",
     "wandb-login", "high", None),
    # wandb/sdk/wandb_run.py preinit wrapper
    ("[rank1]: wandb.errors.Error: You must call wandb.init() before wandb.log()\n",
     "wandb-login", "high", 1),
    # wandb/sdk/lib/apikey.py prompt_api_key (a rank without a tty waits here)
    ("wandb: You can find your API key in your browser here: https://wandb.ai/authorize\n"
     "wandb: Paste an API key from your profile and hit enter, or press ctrl+c to quit:\n",
     "wandb-login", "high", None),
    ("wandb.errors.AuthenticationError: API key must be 40 characters long, yours was 12\n",
     "wandb-login", "high", None),
    # wandb.errors.CommError on wandb.init (server unreachable): shared wording, weak
    ("wandb: ERROR Run initialization has timed out after 90.0 sec.\n", "wandb-login", "low", None),

    # --- slurm-allocation-mismatch ----------------------------------------------------------
    # Slurm srun (more nodes asked of the step than the allocation holds)
    ("srun: error: Only allocated 1 nodes asked for 2\n", "slurm-allocation-mismatch", "high", None),
    # Open MPI orte/mca/rmaps help text
    ("--------------------------------------------------------------------------\n"
     "All nodes which are allocated for this job are already filled.\n"
     "--------------------------------------------------------------------------\n",
     "slurm-allocation-mismatch", "high", None),
    ("srun: Job 4242 step creation still disabled, retrying (Requested nodes are busy)\n",
     "slurm-allocation-mismatch", "low", None),

    # --- no-launcher ------------------------------------------------------------------------
    # torch/distributed/elastic/utils/api.py get_env_variable_or_raise
    ("ValueError: Environment variable TORCHELASTIC_RUN_ID expected, but not set\n",
     "no-launcher", "high", None),
    # variables only torchrun sets (torch/distributed/elastic/agent/server/api.py)
    ("  File \"train.py\", line 9, in <module>\n"
     "    local_world_size = int(os.environ[\"LOCAL_WORLD_SIZE\"])\n"
     "KeyError: 'LOCAL_WORLD_SIZE'\n", "no-launcher", "high", None),
]


@pytest.mark.parametrize(("text", "rule", "confidence", "rank"), CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_wording_names_its_rule(tmp_path: Path, text: str, rule: str, confidence: str,
                                rank: int | None) -> None:
    assert _diagnose(tmp_path, text) == (rule, confidence, rank)


# A neighbouring category's message must not be taken by the rules above.
NEGATIVES: list[tuple[str, str]] = [
    # host allocation failure is host memory, not the device
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate "
     "memory: you tried to allocate 8589934592 bytes. Error code 12 (Cannot allocate memory)\n",
     "host-oom-or-killed"),
    # a Ray host-memory kill is not a device OOM although the class is OutOfMemoryError
    ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n",
     "host-oom-or-killed"),
    # a device OOM is not the host's
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB of which 1.25 GiB is free.\n", "cuda-out-of-memory"),
    # an RCCL/NCCL failure other than memory stays with the library rule
    ("node1:412:530 [3] enqueue.cc:1556 NCCL WARN Cuda failure 'invalid device function'\n",
     "nccl-cuda-library-mismatch"),
    # a bus error in a DataLoader worker is /dev/shm, not a killed worker
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
     "dataloader's workers are out of shared memory.\n", "shm-bus-error"),
    # an architecture mismatch in DDP is a model mismatch across ranks, not unused parameters
    ("RuntimeError: DDP expects same model across all ranks, but Rank 0 has 200 params, while rank 1 "
     "has inconsistent 198 params.\n", "collective-mismatch"),
    # the elastic agent's rendezvous failure is not a missing launcher
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n", "rendezvous-timeout"),
    # jax.distributed.initialize's own checks stay with the JAX rule (jax/_src/distributed.py)
    ("ValueError: coordinator_address should be defined.\n", "jax-coordination"),
    ("ValueError: process_id and num_processes must be nonnegative, with process_id < num_processes. "
     "Got process_id=4, num_processes=4\n", "jax-coordination"),
    # a store timeout with every rank present but one is world-size, not default-PG
    ("torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. "
     "7/8 clients joined.\n", "world-size-mismatch"),
]


@pytest.mark.parametrize(("text", "rule"), NEGATIVES, ids=[n[1] for n in NEGATIVES])
def test_neighbouring_message_keeps_its_own_rule(tmp_path: Path, text: str, rule: str) -> None:
    assert _diagnose(tmp_path, text)[0] == rule


def test_wandb_relogin_hint_is_not_a_login_failure(tmp_path: Path) -> None:
    # wandb/sdk/wandb_login.py prints this on every successful login with a stored key;
    # the crash after it is the cause, not wandb.
    text = ("wandb: W&B API key is configured. Use `wandb login --relogin` to force relogin\n"
            "wandb: Currently logged in as: someone. Use `wandb login --relogin` to force relogin\n"
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n")
    assert _diagnose(tmp_path, text)[0] == "cuda-out-of-memory"


def test_successful_run_with_wandb_lines_is_nothing_failed(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("wandb: Currently logged in as: someone. Use `wandb login --relogin` to force "
                   "relogin\nwandb: Tracking run with wandb version 0.17.0\nstep 100 loss 1.23\n",
                   encoding="utf-8")
    result = diagnose([log])
    assert not result.causes and not result.unrecognised


def test_gloo_argument_check_is_not_the_jobs_world_size(tmp_path: Path) -> None:
    # torch ProcessGroupGloo's argument check: one call's tensor list, not the job's shape
    log = tmp_path / "job.log"
    log.write_text("RuntimeError: ProcessGroupGloo::allgather: invalid input tensor list size 3 does "
                   "not match world size 4\n", encoding="utf-8")
    result = diagnose([log])
    assert all(c.rule.id != "world-size-mismatch" for c in result.causes)
