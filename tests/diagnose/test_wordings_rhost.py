"""Wordings of the memory, checkpoint-layout, launcher-summary and stop rules, from their sources.

Each log is short and built around the real message; the comment names where the
message comes from. Assertions are what the user sees: the rule, how sure, the rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _verdict

# (log text, rule id, confidence, rank or None)
CASES = {
    # torch <= 0.4 TH/THGeneral.c THAlloc (THError "$ Torch: not enough memory: ...")
    "th-not-enough-memory": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 88, in <module>\n"
        "    feats = torch.zeros(n, d)\n"
        "RuntimeError: $ Torch: not enough memory: you tried to allocate 12GB. Buy new RAM! at "
        "/pytorch/torch/lib/TH/THGeneral.c:270\n",
        "host-oom-or-killed", "medium", None),
    # torch 1.x c10/core/CPUAllocator.cpp, Windows build, under torchrun's rank prefix
    "c10-not-enough-memory-rank": (
        "[rank1]: RuntimeError: [enforce fail at ..\\c10\\core\\impl\\alloc_cpu.cpp:72] data. "
        "DefaultCPUAllocator: not enough memory: you tried to allocate 1073741824 bytes.\n",
        "host-oom-or-killed", "medium", 1),
    # torch 2.x c10/core/impl/alloc_cpu.cpp (posix_memalign failed)
    "c10-cant-allocate": (
        "RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't "
        "allocate memory: you tried to allocate 8589934592 bytes. Error code 12 (Cannot allocate "
        "memory)\n",
        "host-oom-or-killed", "medium", None),
    # numpy < 1.17 (multiarray ctors) and numpy >= 1.17 (_ArrayMemoryError)
    "numpy-old-wording": (
        "MemoryError: Unable to allocate array with shape (100000, 100000) and data type float64\n",
        "host-oom-or-killed", "medium", None),
    "numpy-array-memory-error": (
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 74.5 GiB for an array with "
        "shape (100000, 100000) and data type float64\n",
        "host-oom-or-killed", "medium", None),
    # Slurm jobacct_gather (virtual memory enforcement)
    "slurm-virtual-memory": (
        "slurmstepd: error: Job 1234 exceeded virtual memory limit (52428800 > 41943040), being "
        "killed\n",
        "host-oom-or-killed", "medium", None),
    # kubectl describe pod: last state of the container
    "kubectl-exit-code-137": (
        "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    137\n",
        "host-oom-or-killed", "medium", None),
    # node-problem-detector kernel monitor event (reason OOMKilling)
    "k8s-system-oom": (
        "  Warning  OOMKilling  5m  kernel-monitor, node-1  System OOM encountered, victim "
        "process: python, pid: 4242\n",
        "host-oom-or-killed", "medium", None),
    # Linux mm/memcontrol.c (kernel 3.x/4.x) memcg OOM report
    "memcg-task-killed-as-result": (
        "[12345.678901] Task in /slurm/uid_1000/job_42/step_0 killed as a result of limit of "
        "/slurm/uid_1000/job_42\n",
        "host-oom-or-killed", "medium", None),
    # Linux mm/oom_kill.c (2.6/3.x RHEL kernels): UID in the report
    "kernel-killed-process-uid": (
        "[12345.678901] Killed process 4242, UID 1000, (python) total-vm:123456kB, "
        "anon-rss:1234kB, file-rss:0kB\n",
        "host-oom-or-killed", "medium", None),
    # earlyoom (rfjakob/earlyoom main.c)
    "earlyoom": (
        "earlyoom[812]: low memory! at or below SIGTERM limits: mem 10.00%, swap  5.00%\n",
        "host-oom-or-killed", "medium", None),
    # Intel XPU: SYCL PI / Unified Runtime error code for host memory
    "xpu-out-of-host-memory": (
        "RuntimeError: Native API failed. Native API returns: -6 (PI_ERROR_OUT_OF_HOST_MEMORY) "
        "-6 (PI_ERROR_OUT_OF_HOST_MEMORY)\n",
        "host-oom-or-killed", "medium", None),
    # Ray 1.x python/ray/memory_monitor.py
    "ray1-out-of-memory": (
        "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node n1 is used "
        "(59.49 / 62.58 GB).\n",
        "host-oom-or-killed", "medium", None),
    # dask distributed/nanny.py (worker memory limit)
    "dask-memory-budget": (
        "distributed.nanny.memory - WARNING - Worker tcp://127.0.0.1:40000 (pid=4242) exceeded "
        "95% memory budget. Restarting...\n",
        "host-oom-or-killed", "medium", None),
    # Apache Arrow memory_pool.cc (datasets / pandas loading)
    "arrow-malloc": (
        "pyarrow.lib.ArrowMemoryError: malloc of size 8589934592 failed\n",
        "host-oom-or-killed", "medium", None),
    # OpenCV core/src/alloc.cpp OutOfMemoryError
    "opencv-insufficient-memory": (
        "cv2.error: OpenCV(4.8.0) /io/opencv/modules/core/src/alloc.cpp:73: error: "
        "(-4:Insufficient memory) Failed to allocate 1073741824 bytes in function "
        "'OutOfMemoryError'\n",
        "host-oom-or-killed", "medium", None),
    # bash job report in a German locale (glibc de.po: "Killed" -> "Getötet")
    "bash-killed-german": (
        "train.sh: Zeile 3:  4242 Getötet                 python train.py\n",
        "host-oom-or-killed", "low", None),
    # the same in a Simplified Chinese locale (glibc zh_CN.po: "Killed" -> "已杀死"), a strong
    # wording of its own
    "bash-killed-chinese": (
        "run.sh: 行 3:  4242 已杀死               python train.py\n",
        "host-oom-or-killed", "medium", None),
    # C++ new failing (libstdc++ terminate handler): shared with corrupt sizes, so weak
    "bad-alloc-terminate": (
        "terminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc\n",
        "host-oom-or-killed", "low", None),
    # JVM heap (Spark/ Hadoop data preparation)
    "java-heap": (
        "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n",
        "host-oom-or-killed", "low", None),
    # kube-scheduler: pods not placed on nodes under memory pressure
    "k8s-memory-pressure": (
        "Warning  FailedScheduling  default-scheduler  0/4 nodes are available: 4 node(s) had "
        "condition: [MemoryPressure].\n",
        "host-oom-or-killed", "low", None),
    # Windows ERROR_COMMITMENT_LIMIT in another locale (Python OSError), Rust's "(os error 1455)"
    "winerror-1455-localised": (
        "OSError: [WinError 1455] Die Auslagerungsdatei ist zu klein, um diesen Vorgang "
        "durchzufuhren\n",
        "host-oom-or-killed", "medium", None),
    "safetensors-os-error-1455": (
        "safetensors_rust.SafetensorError: Error while deserializing header: "
        "MetadataIncompleteBuffer (os error 1455)\n",
        "host-oom-or-killed", "medium", None),
    # Windows ERROR_NOT_ENOUGH_MEMORY
    "winerror-8": (
        "OSError: [WinError 8] Not enough memory resources are available to process this "
        "command\n",
        "host-oom-or-killed", "medium", None),
    # Linux mm/page_alloc.c warn_alloc: can be fragmentation, so weak
    "kernel-page-allocation-failure": (
        "[ 8123.4] python: page allocation failure: order:4, mode:0x40dc0(GFP_KERNEL|__GFP_COMP"
        "|__GFP_ZERO), nodemask=(null)\n",
        "host-oom-or-killed", "low", None),
    # Hadoop YARN NodeManager ContainersMonitorImpl (Spark data preparation)
    "yarn-container-killed": (
        "ExecutorLostFailure (executor 3 exited caused by one of the running tasks) Reason: "
        "Container killed by YARN for exceeding memory limits. 10.4 GB of 10 GB physical memory "
        "used.\n",
        "host-oom-or-killed", "medium", None),
    "yarn-beyond-physical": (
        "Container [pid=1234,containerID=container_1_0001_01_000002] is running beyond physical "
        "memory limits. Current usage: 2.1 GB of 2 GB physical memory used; Killing container.\n",
        "host-oom-or-killed", "medium", None),
    # bash's "Killed" glued to a tqdm bar (no newline after the carriage-return redraws)
    "tqdm-killed-glued": (
        "Loading checkpoint shards:  50%|#####     | 1/2 [00:10<00:10, 10.5s/it]Killed\n",
        "host-oom-or-killed", "medium", None),
    # VS Code Jupyter extension when the kernel process dies
    "vscode-kernel-crashed": (
        "The Kernel crashed while executing code in the current cell or a previous cell. Please "
        "review the code in the cell(s) to identify a possible cause of the failure.\n",
        "host-oom-or-killed", "low", None),
    # torch >= 2.5 torch/distributed/elastic/multiprocessing/api.py _close
    "elastic-closing-process-sigterm": (
        "W0101 00:00:00.000 1 torch/distributed/elastic/multiprocessing/api.py:897] Closing "
        "process 4242 via signal SIGTERM\n",
        "elastic-summary-no-root-cause", "low", None),
    "elastic-closing-process-sighup": (
        "W0101 00:00:00.000 1 torch/distributed/elastic/multiprocessing/api.py:897] Closing "
        "process 4243 via signal SIGHUP\n",
        "stopped-externally", "high", None),
    # torch FSDP _state_dict_utils.py (_sharded_pre_load_state_dict_hook)
    "fsdp-local-shard-size": (
        "[rank3]: AssertionError: Local shard size = 14031139 and the tensor in the state_dict "
        "is 56124554.\n",
        "checkpoint-layout-mismatch", "high", 3),
    # DeepSpeed 0.19 runtime/state_dict_factory.py (SDLoaderBase.check_ckpt_list)
    "deepspeed-mp-world-size": (
        "AssertionError: checkpoint count 2 is different from saved mp_world_size 4\n",
        "checkpoint-layout-mismatch", "high", None),
    # DeepSpeed 0.19 checkpoint/zero_checkpoint.py
    "deepspeed-dp-index": (
        "AssertionError: DP index 8 >= DP degree 8\n",
        "checkpoint-layout-mismatch", "low", None),
    # lightning_fabric/strategies/deepspeed.py load_checkpoint (Lightning 2.x)
    "lightning-deepspeed-unable": (
        "[rank: 0] RuntimeError: DeepSpeed was unable to load the checkpoint. Ensure you passed "
        "in a DeepSpeed compatible checkpoint or a single checkpoint file by setting "
        "`DeepSpeedStrategy(..., load_full_weights=True)`.\n",
        "checkpoint-layout-mismatch", "low", 0),
    # torch FSDP _optim_utils.py (_flatten_optim_state)
    "fsdp-optim-flat": (
        "AssertionError: tensor optim state: torch.Size([1024]) flat parameter: "
        "torch.Size([2048])\n",
        "checkpoint-layout-mismatch", "low", None),
    # torch FSDP _optim_utils.py (_gather_all_orig_param_state)
    "fsdp-local-shard-times-world": (
        "AssertionError: The size of local shard times the world size should equal to the "
        "gathered tensor size. The inconsistency may be from a bug of FlatParameter's metadata "
        "or the reconstruction logic in optimizer state dict.\n",
        "checkpoint-layout-mismatch", "low", None),
    # torch _shard/sharded_tensor/shard.py
    "sharded-tensor-shard-lengths": (
        "ValueError: Shard tensor size does not match with metadata.shard_lengths! Found shard "
        "tensor size: [512, 64], metadata.shard_lengths: [256, 64],\n",
        "checkpoint-layout-mismatch", "low", None),
    # Megatron-Core dist_checkpointing/core.py
    "megatron-checkpointing-exception": (
        "megatron.core.dist_checkpointing.core.CheckpointingException: Invalid access pattern "
        "for ShardedTensor(key='decoder.layers.self_attention.linear_qkv.weight')\n",
        "checkpoint-layout-mismatch", "low", None),
    # DeepSpeed pipeline engine layer files (runtime/pipe/module.py ckpt_layer_path)
    "deepspeed-pipe-layer-file": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'ckpt/global_step100/layer_01-model_01-model_states.pt'\n",
        "checkpoint-layout-mismatch", "low", None),
    # torch.multiprocessing.spawn (torch <= 1.5: a plain Exception)
    "old-spawn-exit-code": (
        "Traceback (most recent call last):\n"
        "  File \"/opt/conda/lib/python3.7/site-packages/torch/multiprocessing/spawn.py\", line "
        "107, in join\n"
        "    (error_index, exitcode)\n"
        "Exception: process 1 terminated with exit code 1\n",
        "elastic-summary-no-root-cause", "medium", 1),
    # lightning_fabric/strategies/launchers/subprocess_script.py _ChildProcessObserver
    "lightning-child-observer": (
        "Child process with PID 4242 terminated with code 1. Forcefully terminating all other "
        "processes to avoid zombies\n",
        "elastic-summary-no-root-cause", "medium", None),
    # horovod/runner/gloo_run.py
    "horovod-gloo-run": (
        "Terminating remaining workers after failure of Process 2.\n",
        "elastic-summary-no-root-cause", "medium", 2),
    # Open MPI 5 (PRRTE) errmgr help text
    "prterun-noticed": (
        "prterun noticed that process rank 3 with PID 4242 on node n1 exited on signal 6 "
        "(Aborted).\n",
        "elastic-summary-no-root-cause", "medium", 3),
    # accelerate commands/launch.py simple_launcher
    "accelerate-simple-launcher": (
        "  File \"/usr/lib/python3/site-packages/accelerate/commands/launch.py\", line 1023, in "
        "simple_launcher\n"
        "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n",
        "elastic-summary-no-root-cause", "low", None),
    # Kubernetes job controller event
    "k8s-backoff-limit": (
        "  Warning  BackoffLimitExceeded  2m  job-controller  Job has reached the specified "
        "backoff limit\n",
        "elastic-summary-no-root-cause", "low", None),
    # sagemaker-training-toolkit errors.py (the script's stderr was not captured)
    "sagemaker-user-script": (
        "sagemaker_training.errors.ExecuteUserScriptError: ExecuteUserScriptError:\n"
        "ExitCode 1\nErrorMessage \"\"\nCommand \"/opt/conda/bin/python3.9 train.py\"\n",
        "elastic-summary-no-root-cause", "medium", None),
    # kubelet event (CrashLoopBackOff)
    "k8s-crashloop": (
        "  Warning  BackOff  2m (x10 over 5m)  kubelet  Back-off restarting failed container "
        "trainer in pod job-0\n",
        "elastic-summary-no-root-cause", "low", None),
    # docker compose service summary; 137 is the OOM killer's SIGKILL, 143 a docker stop
    "compose-exit-1": (
        "trainer-1 exited with code 1\n", "elastic-summary-no-root-cause", "low", None),
    "compose-exit-137": (
        "trainer-1 exited with code 137\n", "host-oom-or-killed", "medium", None),
    # Slurm contribs/seff
    "seff-failed": (
        "Job ID: 4242\nCluster: c1\nState: FAILED (exit code 1)\n",
        "elastic-summary-no-root-cause", "low", None),
    # PBS Pro / Torque job end record: 256 + signal number
    "pbs-exit-status-sigkill": (
        "Exit_status=265\nresources_used.mem=62914560kb\n", "host-oom-or-killed", "medium", None),
    "pbs-exit-status-sigterm": (
        "Exit_status=271\nresources_used.walltime=24:00:04\n", "stopped-externally", "high", None),
    # systemd unit stopped
    "systemd-sigterm": (
        "systemd[1]: train.service: Main process exited, code=killed, status=15/TERM\n",
        "stopped-externally", "high", None),
    # kubectl describe job (activeDeadlineSeconds)
    "k8s-deadline": (
        "Events:\n  Type     Reason            Age   From            Message\n"
        "  Warning  DeadlineExceeded  10s   job-controller  Job was active longer than "
        "specified deadline\nStatus: Failed\nReason:       DeadlineExceeded\n",
        "stopped-externally", "high", None),
    # srun on Ctrl-C (src/srun/srun_job.c)
    "srun-interrupt": (
        "^Csrun: interrupt (one more within 1 sec to abort)\n",
        "stopped-externally", "low", None),
    # Lightning/FAIR requeue handler outside Slurm
    "bypassing-sigterm": (
        "Signal handler called with signal 15\nBypassing SIGTERM.\n",
        "stopped-externally", "low", None),
    # CPython 3.13 (Modules/_threadmodule.c)
    "python-finalization-error": (
        "PythonFinalizationError: cannot join thread at interpreter shutdown\n",
        "exit-time-abort", "medium", None),
    # glibc nptl/unwind at exit
    "libgcc-pthread-cancel": (
        "libgcc_s.so.1 must be installed for pthread_cancel to work\n",
        "exit-time-abort", "low", None),
    # torch on ROCm (c10/hip/HIPException.h "HIP error: ")
    "hip-error-oom": (
        "[rank0]: RuntimeError: HIP error: out of memory\n"
        "[rank0]: HIP kernel errors might be asynchronously reported at some other API call\n",
        "cuda-out-of-memory", "high", 0),
    # vLLM worker (v0 engine determine_num_available_blocks)
    "vllm-no-cache-blocks": (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.\n",
        "cuda-out-of-memory", "high", None),
    # CUDA libraries printing cudaGetErrorString after cudaMalloc
    "cudamalloc-oom": (
        "cudaMalloc failed: out of memory\n",
        "cuda-out-of-memory", "high", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wording(tmp_path: Path, name: str) -> None:
    text, rule, confidence, rank = CASES[name]
    assert _verdict(tmp_path, text) == (rule, confidence, rank)


@pytest.mark.parametrize(("text", "not_rule"), [
    # device memory is not host memory (torch c10/cuda/CUDACachingAllocator.cpp)
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB of which 1.2 GiB is free.\n", "host-oom-or-killed"),
    ("RuntimeError: Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) "
     "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY\n", "host-oom-or-killed"),
    # host memory is not device memory
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't "
     "allocate memory: you tried to allocate 8589934592 bytes.\n", "cuda-out-of-memory"),
    ("RuntimeError: Native API failed. Native API returns: -6 (PI_ERROR_OUT_OF_HOST_MEMORY)\n",
     "cuda-out-of-memory"),
    # a plain load_state_dict shape difference is not a parallel layout change
    ("RuntimeError: Error(s) in loading state_dict for Net:\n\tsize mismatch for fc.weight: "
     "copying a param with shape torch.Size([10, 4]) from checkpoint, the shape in current "
     "model is torch.Size([10, 3]).\n", "checkpoint-layout-mismatch"),
    # DeepSpeed prints this warning on healthy weight-only loads (the optimizer state is
    # skipped); it says nothing about why a later run failed
    ("[WARNING] [engine.py:2960:_get_all_zero_checkpoint_state_dicts] The following zero "
     "checkpoints paths are missing: ['ckpt/global_step10/zero_pp_rank_0_mp_rank_00_optim_"
     "states.pt']\n", "checkpoint-layout-mismatch"),
    # a rank killed by signal 9 is the OOM killer, not only a launcher's summary
    ("prterun noticed that process rank 0 with PID 1 on node n1 exited on signal 9 (Killed).\n",
     "elastic-summary-no-root-cause"),
    # systemd's SIGKILL and the kubelet's OOMKilled are memory, not an outside stop
    ("systemd[1]: train.service: Main process exited, code=killed, status=9/KILL\n",
     "stopped-externally"),
    ("    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n",
     "stopped-externally"),
    # a crash with a traceback during training is not an exit-time abort
    ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
     "ValueError: bad config value\n", "exit-time-abort"),
])
def test_neighbour_not_taken(tmp_path: Path, text: str, not_rule: str) -> None:
    assert _verdict(tmp_path, text)[0] != not_rule
