"""Wordings of the launcher-summary, checkpoint-layout and library-mismatch rules, from their sources.

Each case is a short realistic log built around the real message; the comment says where the
message comes from (file, version). A case asserts what the user sees: the rule, the confidence
class the rule is meant to give (a launcher summary alone is a consequences-only verdict, medium;
a weak wording is low; a strong cause with nothing before it is high) and, where a prefix or the
summary names it, the rank. The negative cases are neighbouring categories' messages that these
rules must not take.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _diagnose

SUMMARY = "elastic-summary-no-root-cause"
LAYOUT = "checkpoint-layout-mismatch"
LIBS = "nccl-cuda-library-mismatch"

# torchrun's own frames above the summary (torch/distributed/launcher/api.py launch_agent)
TORCHRUN = (
    'Traceback (most recent call last):\n  File "/opt/conda/bin/torchrun", line 8, in <module>\n'
    "    sys.exit(main())\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 246, '
    "in launch_agent\n    raise ChildFailedError(\n"
)
# torch 1.9 torch/distributed/elastic/multiprocessing/errors/__init__.py: "*" border, centred
# title, "Root Cause:" first, msg field "Process failed with exitcode N"
OLD_SUMMARY = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    "***************************************\n           train.py FAILED           \n"
    "=======================================\nRoot Cause:\n[0]:\n  time: 2021-08-02_10:11:12\n"
    "  rank: 3 (local_rank: 3)\n  exitcode: 1 (pid: 4242)\n  error_file: <N/A>\n"
    '  msg: "Process failed with exitcode 1"\n=======================================\n'
    "Other Failures:\n  <NO_OTHER_FAILURES>\n***************************************\n"
)
# torch 1.10 errors/__init__.py _no_error_file_warning_msg (warnings.warn from @record)
NO_ERROR_FILE_WARNING = (
    "/opt/conda/lib/python3.8/site-packages/torch/distributed/elastic/multiprocessing/errors/"
    "__init__.py:373: UserWarning: \n\n"
    "**********************************************************************\n"
    "               CHILD PROCESS FAILED WITH NO ERROR_FILE                \n"
    "**********************************************************************\n"
    "CHILD PROCESS FAILED WITH NO ERROR_FILE\n"
    "Child process 4242 (local_rank 2) FAILED (exitcode 1)\n"
    "Error msg: Process failed with exitcode 1\n"
    "Without writing an error file to <N/A>.\n"
    "While this DOES NOT affect the correctness of your application,\n"
    "no trace information about the error will be available for inspection.\n"
)

# (log text, rule id, confidence, rank or None)
CASES: dict[str, tuple[str, str, str, int | None]] = {
    # --- elastic-summary-no-root-cause ---------------------------------------------------
    "torch-1.9-summary": (TORCHRUN + OLD_SUMMARY, SUMMARY, "medium", 3),
    "torch-1.9-summary-one-line": (OLD_SUMMARY.replace("\n", " "), SUMMARY, "medium", 3),
    "torch-1.9-msg-field-only": (
        'Root Cause:\n[0]:\n  rank: 1 (local_rank: 1)\n  msg: "Process failed with exitcode 1"\n',
        SUMMARY, "medium", 1),
    "torch-1.10-no-error-file-warning": (NO_ERROR_FILE_WARNING, SUMMARY, "medium", None),
    "torch-1.10-warning-two-lines": (
        "Child process 4242 (local_rank 2) FAILED (exitcode 1)\n"
        "Error msg: Process failed with exitcode 1\n", SUMMARY, "medium", None),
    # torch >= 1.11 errors/__init__.py record(): logger.info for a first failure without error file
    "record-no-error-file-info": (
        "INFO:torch.distributed.elastic.multiprocessing.errors:local_rank 0 FAILED with no error "
        "file. Decorate your entrypoint fn with @record for traceback info. See: "
        "https://pytorch.org/docs/stable/elastic/errors.html\n", SUMMARY, "medium", None),
    # elastic multiprocessing/api.py logger.error, cut by a wrap before "local_rank"
    "failed-line-wrapped-before-local-rank": (
        "E0912 10:11:12.345000 140221 torch/distributed/elastic/multiprocessing/api.py:869] "
        "failed (exitcode: 1)\nlocal_rank: 0 (pid: 123) of binary: /usr/bin/python3\n",
        SUMMARY, "medium", 0),
    # the summary's fields as a screenshot's OCR or a collapsed web page gives them
    "summary-fields-spacing-lost": (
        "rank : 2 (local_rank: 2)\nexitcode: 1(pid: 4242)\nerror_file : <N/A>\n",
        SUMMARY, "medium", 2),
    # ray/train/base_trainer.py TrainingFailedError._RESTORE_MSG
    "ray-train": (
        "ray.train.base_trainer.TrainingFailedError: The Ray Train run failed. Please inspect the "
        "previous error messages for a cause. After fixing the issue (assuming that the error is "
        "not caused by your own application logic, but rather an error such as OOM), you can "
        "restart the run from scratch or continue this run.\n", SUMMARY, "medium", None),
    # ray/tune/tune.py: raise TuneError("Trials did not complete", incomplete_trials)
    "ray-tune": ("ray.tune.error.TuneError: ('Trials did not complete', [TorchTrainer_5b2e1_00000])\n",
                 SUMMARY, "medium", None),
    # invoke/exceptions.py UnexpectedExit (Fabric, colossalai run's multi-node launcher)
    "invoke-unexpected-exit": (
        "Encountered a bad command exit code!\n\nCommand: 'torchrun --nproc_per_node 8 train.py'\n\n"
        "Exit code: 1\n\nStdout: already printed\n\nStderr: already printed\n",
        SUMMARY, "medium", None),
    # paddle/distributed/fleet/launch_utils.py watch_local_trainers (Paddle <= 2.2)
    "paddle-fleet-launch": (
        "ERROR 2022-03-02 10:11:12,345 launch_utils.py:642] ABORT!!! Out of all 4 trainers, the "
        "trainer process with rank=[1] was aborted. Please check its log.\n",
        SUMMARY, "medium", 1),
    # paddle/distributed/launch/controllers/controller.py watch() (Paddle >= 2.3)
    "paddle-launch-controller": (
        "LAUNCH ERROR 2023-03-02 10:11:12,345 Container failed !!!\n"
        "Container rank 1 status failed cmd ['/usr/bin/python', '-u', 'train.py'] code 1 log "
        "log/workerlog.1\n", SUMMARY, "medium", None),
    # composer/cli/launcher.py _print_process_exit_status
    "composer-launcher": (
        "Global rank 1 (PID 4242) exited with code 1\n"
        "----------Begin global rank 1 STDOUT----------\nstep 1\n"
        "----------End global rank 1 STDOUT----------\n", SUMMARY, "medium", 1),
    # Google Vertex AI custom job error ("The replica REPLICA_NAME exited with a non-zero status
    # of EXIT_CODE"), its troubleshooting page
    "vertex-ai-replica": (
        "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error.\n",
        SUMMARY, "medium", None),
    # SkyPilot job log
    "skypilot-job": ("ERROR: Job 1 failed with return code list: [1]\nJob finished (status: FAILED).\n",
                     SUMMARY, "medium", None),
    # kubectl describe pod of a container that exited 1 (weak: only an exit code)
    "kubectl-describe": ("    Last State:     Terminated\n      Reason:       Error\n"
                         "      Exit Code:    1\n", SUMMARY, "low", None),
    # torch/multiprocessing/spawn.py message without its exception name (weak)
    "spawn-message-alone": ("process 1 terminated with exit code 1\n", SUMMARY, "low", 1),
    # --- checkpoint-layout-mismatch ------------------------------------------------------
    # DeepSpeed runtime/engine.py _get_all_zero_checkpoint_names: a ZeRO shard of a rank the
    # checkpoint does not have (bf16 optimizer prefix), here as Windows words it
    "zero-shard-windows": (
        "FileNotFoundError: [WinError 2] The system cannot find the file specified: "
        "'D:\\\\ckpt\\\\global_step5\\\\bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt'\n",
        LAYOUT, "high", 1),
    # Megatron-LM checkpointing.py get_checkpoint_name: mp_rank_XX(_YYY) per TP (and PP) rank
    "megatron-tp-rank-file": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'checkpoints/iter_0001000/mp_rank_01_000/model_optim_rng.pt'\n", LAYOUT, "high", None),
    # fairseq trainer.checkpoint_suffix: "-shard{rank}" (FSDP sharded state), "-model_part-{rank}"
    "fairseq-fsdp-shard": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'checkpoints/checkpoint_last-shard3.pt'\n", LAYOUT, "high", None),
    "fairseq-model-part": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'checkpoints/checkpoint_last-model_part-1.pt'\n", LAYOUT, "high", None),
    # a rank 0 file alone: as often a wrong path as another layout (weak)
    "rank-0-file-missing-is-weak": (
        "FileNotFoundError: [Errno 2] No such file or directory: "
        "'checkpoints/iter_0001000/mp_rank_00/model_optim_rng.pt'\n", LAYOUT, "low", None),
    # transformers trainer.py _load_rng_state: one CUDA RNG state per GPU of the saving run
    "hf-trainer-rng-state": (
        "[INFO|trainer.py:2214] 2023-06-07 >> Didn't manage to set back the RNG states of the GPU "
        "because of the following error:\n tensor index out of range\nThis won't yield the same "
        "results as if the training had not been interrupted.\n", LAYOUT, "low", None),
    # the summary's traceback field where a page kept the link's text but dropped its URL
    "summary-link-text-only": ("  rank      : 1 (local_rank: 1)\n  traceback : To enable traceback "
                               "see:\n", SUMMARY, "medium", 1),
    # --- backend-device-unsupported --------------------------------------------------------
    # NCCL src/misc/argcheck.cc CudaPtrCheck: WARN("%s : %s %p is not a valid pointer")
    "nccl-host-buffer": (
        "node1:4242:4242 [0] enqueue.cc:1810 NCCL WARN AllReduce : sendbuff 0x7f2c3a000000 is not a "
        "valid pointer\nnode1:4242:4242 [0] NCCL INFO enqueue.cc:1866 -> 4\n",
        "backend-device-unsupported", "high", None),
    # --- cuda-invalid-device-ordinal / cuda-unavailable ------------------------------------
    # PaddlePaddle phi/backends/gpu/cuda/cuda_info.cc GetGPUComputeCapability (capped at medium)
    "paddle-device-id-beyond-count": (
        "InvalidArgumentError: Device id must be less than GPU count, but received id is: 2. GPU "
        "count is: 1.\n  [Hint: Expected id < GetGPUDeviceCount(), but received id:2 >= "
        "GetGPUDeviceCount():1.]\n", "cuda-invalid-device-ordinal", "medium", None),
    "paddle-device-id-no-gpu": (
        "InvalidArgumentError: Device id must be less than GPU count, but received id is: 0. GPU "
        "count is: 0.\n", "cuda-unavailable", "medium", None),
    # TensorFlow / XLA tsl device_id_utils.cc ParseVisibleDeviceList
    "tf-visible-device-list": (
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: 'visible_device_list' listed "
        "an invalid Device id '1' but visible device count is 1\n",
        "cuda-invalid-device-ordinal", "medium", None),
    "tf-visible-device-list-none": (
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: 'visible_device_list' listed "
        "an invalid GPU id '0' but visible device count is 0\n", "cuda-unavailable", "medium", None),
    # --- world-size-mismatch -------------------------------------------------------------
    # megatron/core/num_microbatches_calculator.py: GBS % (MBS x DP) != 0 on this many GPUs
    "megatron-global-batch-vs-dp": (
        "AssertionError: global batch size (64) is not divisible by micro batch size (1) times "
        "data parallel size (3)\n", "world-size-mismatch", "high", None),
    # --- cuda-out-of-memory ----------------------------------------------------------------
    # vLLM worker (<= 0.8) and v1 kv_cache_utils.py: the KV cache left after the weights is too small
    "vllm-kv-cache-too-small": (
        "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens "
        "that can be stored in KV cache (93760). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.\n", "cuda-out-of-memory", "high",
        None),
    "vllm-v1-kv-cache-memory": (
        "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GiB "
        "KV cache is needed, which is larger than the available KV cache memory (1.25 GiB). Based "
        "on the available memory, the estimated maximum model length is 10240.\n",
        "cuda-out-of-memory", "high", None),
    # --- nccl-cuda-library-mismatch ------------------------------------------------------
    # torch/cuda/__init__.py _check_capability, torch 1.x old_gpu_warn
    "torch-gpu-too-old": (
        "/x/torch/cuda/__init__.py:83: UserWarning: \n"
        "    Found GPU0 GeForce GT 730 which is of cuda capability 3.0.\n"
        "    PyTorch no longer supports this GPU because it is too old.\n"
        "    The minimum cuda capability supported by this library is 3.7.\n", LIBS, "high", None),
    # torch/cuda/__init__.py _check_capability, torch 2.0 - 2.7
    "torch-capability-range": (
        "/x/torch/cuda/__init__.py:155: UserWarning: \n"
        "    Found GPU0 Tesla K80 which is of cuda capability 3.7.\n"
        "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
        "    (5.0) - (9.0)\n", LIBS, "high", None),
    # HIP runtime (clr hip_code_object.cpp) with AMD_LOG_LEVEL=1, without the error's name
    "hip-no-code-object": (
        ':1:hip_code_object.cpp      :456 : 1885938529 us: "Unable to find code object for all '
        'current devices!"\nAborted (core dumped)\n', LIBS, "high", None),
    # ROCr hsa_status_string(HSA_STATUS_ERROR_INVALID_ISA)
    "hsa-invalid-isa": ("HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is "
                        "invalid.\n", LIBS, "high", None),
    # horovod/common/exceptions.py get_version_mismatch_message
    "horovod-version-mismatch": (
        "horovod.common.exceptions.HorovodVersionMismatchError: Framework pytorch installed with "
        "version 1.13.1 but found version 2.0.1.\n", LIBS, "high", None),
    # torch/utils/cpp_extension.py _check_cuda_version (host compiler range of the toolkit)
    "gxx-newer-than-cuda-accepts": (
        "RuntimeError: The current installed version of g++ (13.2.0) is greater than the maximum "
        "required version by CUDA 11.8. Please make sure to use an adequate version of g++ "
        "(>=6.0.0, <12.0).\n", LIBS, "high", None),
    # CUDA include/crt/host_config.h under nvcc
    "nvcc-host-config": (
        "/usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- unsupported GNU "
        "version! gcc versions later than 12 are not supported!\n", LIBS, "high", None),
    # bitsandbytes/cextension.py (>= 0.43)
    "bitsandbytes-no-binary": (
        "Could not find the bitsandbytes CUDA binary at "
        "PosixPath('/x/bitsandbytes/libbitsandbytes_cuda124.so')\n", LIBS, "high", None),
    # cuDNN 8 on Windows (CTranslate2 / faster-whisper): cudnn_ops_infer64_8.dll not on PATH
    "cudnn-dll-not-located": (
        "Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!\n",
        LIBS, "high", None),
    # CTranslate2 src/cuda/utils.cc loading cuBLAS, and cuDNN's symbol loader
    "ctranslate2-cublas": ("RuntimeError: Library libcublas.so.12 is not found or cannot be "
                           "loaded\n", LIBS, "high", None),
    "cudnn-symbol": ("Invalid handle. Cannot load symbol cudnnCreate\n", LIBS, "high", None),
    # SYCL runtime (Intel XPU): sycl::runtime_error for a binary with no image for the device
    "sycl-invalid-binary": (
        "terminate called after throwing an instance of 'sycl::_V1::runtime_error'\n"
        "  what():  Native API failed. Native API returns: -42 (PI_ERROR_INVALID_BINARY) -42 "
        "(PI_ERROR_INVALID_BINARY)\nAborted (core dumped)\n", LIBS, "high", None),
    # TensorFlow's convolution without a loadable cuDNN (weak)
    "tf-dnn-not-found": ("tensorflow.python.framework.errors_impl.UnimplementedError: DNN "
                         "library is not found.\n", LIBS, "low", None),
    # XLA nvptx_compiler.cc warning (JAX): the driver is older than ptxas (weak)
    "xla-driver-older-than-ptxas": (
        "W external/xla/xla/service/gpu/nvptx_compiler.cc:760] The NVIDIA driver's CUDA version "
        "is 12.0 which is older than the ptxas CUDA version (12.3.107). Because the driver is "
        "older than the ptxas version, XLA is disabling parallel compilation.\n",
        LIBS, "low", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wording_names_its_rule(tmp_path: Path, name: str) -> None:
    text, rule, confidence, rank = CASES[name]
    assert _diagnose(tmp_path, text) == (rule, confidence, rank)


# (log text, the rule it belongs to, or None for "no known cause")
NEIGHBOURS: dict[str, tuple[str, str | None]] = {
    # a rank's own OOM before the launcher's line: the cause, not the summary
    "oom-before-summary": (
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "E0912 10:11:12.345000 140221 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: 1) local_rank: 1 (pid: 123) of binary: /usr/bin/python\n",
        "cuda-out-of-memory"),
    # a summary whose child was SIGKILLed is the host OOM killer's, not a bare summary
    "summary-of-sigkill": (
        "rank : 1 (local_rank: 1)\nexitcode : -9 (pid: 4242)\nerror_file: <N/A>\n"
        "traceback : Signal 9 (SIGKILL) received by PID 4242\n", "host-oom-or-killed"),
    # Vertex AI's OOM wording of a replica exit is not the plain exit summary
    "vertex-replica-oom": ("The replica master 0 ran out-of-memory and exited with a non-zero "
                           "status of 9(SIGKILL)\n", "host-oom-or-killed"),
    # a dataset shard missing is not a checkpoint shard
    "dataset-shard-missing": ("FileNotFoundError: [Errno 2] No such file or directory: "
                              "'data/train-shard3.parquet'\n", None),
    # Windows paging file exhausted while loading cuDNN's DLL: host memory, not a library mismatch
    "paging-file-loading-cudnn": (
        'OSError: [WinError 1455] The paging file is too small for this operation to complete. '
        'Error loading "C:\\\\x\\\\torch\\\\lib\\\\cudnn_cnn_infer64_8.dll" or one of its '
        "dependencies.\n", "host-oom-or-killed"),
    # JAX's CUDA backend without a GPU is no library mismatch
    "jax-no-visible-gpu": ("CUDA backend failed to initialize: FAILED_PRECONDITION: No visible GPU "
                           "devices. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)\n",
                           "cuda-unavailable"),
}


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_neighbouring_message_keeps_its_own_rule(tmp_path: Path, name: str) -> None:
    text, rule = NEIGHBOURS[name]
    assert _diagnose(tmp_path, text)[0] == rule
