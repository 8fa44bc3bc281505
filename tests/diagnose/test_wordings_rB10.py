"""Wordings of the checkpoint-layout, host and device memory, shared-memory, port-in-use and wandb
rules (rule writer rB10).

Each log is short and built around the real message; the comment names where the message comes
from. Assertions are what the user sees: the rule, how sure, the rank. The negative cases are a
neighbouring category's message that the new patterns must not take.
"""

from __future__ import annotations

from tests.diagnose.wording import wording_tests

# (log text, rule id, confidence, rank or None)
CASES = {
    # torch FSDP: loading a FULL/LOCAL state dict of a flat parameter sharded over another world size
    "fsdp-wrapped-module-size-mismatch": (
        "[rank1]: RuntimeError: Error(s) in loading state_dict for FullyShardedDataParallel:\n"
        "[rank1]: \tsize mismatch for _fsdp_wrapped_module.layers.0._fsdp_wrapped_module.weight: copying "
        "a param with shape torch.Size([1048576]) from checkpoint, the shape in current model is "
        "torch.Size([262144]).\n",
        "checkpoint-layout-mismatch", "high", 1),
    # fairseq with fairscale FSDP (FlattenParamsWrapper's _fpw_module)
    "fairseq-fpw-module-size-mismatch": (
        "2023-03-01 10:00:00 | INFO | fairseq.trainer | Preparing to load checkpoint "
        "checkpoints/checkpoint_last-shard0.pt\n"
        "\tsize mismatch for decoder._fpw_module.flat_param_0: copying a param with shape "
        "torch.Size([52428800]) from checkpoint, the shape in current model is torch.Size([26214400]).\n",
        "checkpoint-layout-mismatch", "high", None),
    # transformers trainer.py _load_rng_state (INFO): the saving run had fewer processes
    "hf-trainer-no-rng-file": (
        "Continuing training from checkpoint, will skip to saved global_step\n"
        "Didn't find an RNG file for process 4, if you are resuming a training that wasn't launched in a "
        "distributed fashion, reproducibility is not guaranteed.\n",
        "checkpoint-layout-mismatch", "low", None),
    # MMEngine runner/checkpoint.py load_state_dict with strict=False (a warning)
    "mmengine-state-dict-do-not-match": (
        "11/20 10:00:00 - mmengine - WARNING - The model and loaded state dict do not match exactly\n"
        "\n"
        "size mismatch for backbone.layer1.0.conv1.weight: copying a param with shape "
        "torch.Size([32, 64, 1, 1]) from checkpoint, the shape in current model is "
        "torch.Size([64, 64, 1, 1]).\n",
        "checkpoint-layout-mismatch", "low", None),
    # fairseq data/iterators.py EpochBatchIterator.load_state_dict
    "fairseq-dataloader-mismatch": (
        "Cannot resume training due to dataloader mismatch, please report this to the fairseq "
        "developers. You can relaunch training with `--reset-dataloader` and it should work.\n",
        "checkpoint-layout-mismatch", "low", None),
    # a training script's own resume guard
    "script-world-size-guard": (
        "[Resume] Warning: checkpoint was saved with world_size=8, current world_size=4\n",
        "checkpoint-layout-mismatch", "high", None),
    # SageMaker training job FailureReason
    "sagemaker-instance-more-memory": (
        "UnexpectedStatusException: Error for Training job pytorch-training-2024-01-01-00-00-00-000: "
        "Failed. Reason: ClientError: Please use an instance type with more memory, or reduce the size "
        "of job data processed on an instance.\n",
        "host-oom-or-killed", "medium", None),
    # Grid Engine execd
    "sge-h-vmem": (
        "job 4242.1 exceeds job hard limit \"h_vmem\" of queue \"gpu.q@node07\" (34359738368.00000 > "
        "limit:32212254720.00000) - sending SIGKILL\n",
        "host-oom-or-killed", "medium", None),
    # earlyoom
    "earlyoom-sigkill": (
        "mem avail:   412 of 63912 MiB ( 0.64%), swap free:    0 of    0 MiB ( 0.00%)\n"
        "low memory! at or below SIGKILL limits: mem  1.00%, swap  1.00%\n"
        "sending SIGKILL to process 31337 uid 1000 \"python\": badness 912, VmRSS 60123 MiB\n",
        "host-oom-or-killed", "medium", None),
    # torch c10/cuda/driver_api.h (expandable segments)
    "torch-cuda-driver-error-oom": (
        "[rank0]: RuntimeError: CUDA driver error: out of memory\n",
        "cuda-out-of-memory", "high", 0),
    # Ascend runtime (CANN) rtMalloc failure
    "ascend-rtmalloc-driver-error": (
        "[ERROR] RUNTIME(12345,python):2024-05-01-10:00:00.000.000 [npu_driver.cc:1234]12345 DevMemAlloc:"
        "[drv api] halMemAlloc failed: size=2147483648, drvRetCode=6, reason=[driver error:out of memory]\n",
        "cuda-out-of-memory", "high", None),
    # XLA allocator adapter (JAX on GPU)
    "xla-failed-to-allocate-request": (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for "
        "2.00GiB (2147483648B) on device ordinal 0\n",
        "cuda-out-of-memory", "high", None),
    # XLA TPU compiler (a status line without "Error:")
    "xla-tpu-exceeded-hbm": (
        "Used 20.50G of 15.48G hbm. Exceeded hbm capacity by 5.02G.\n",
        "cuda-out-of-memory", "high", None),
    "tpu-attempting-to-allocate": (
        "Resource exhausted: Attempting to allocate 1.20G. That was not possible. There are 800.00M free.\n",
        "cuda-out-of-memory", "high", None),
    # DeepSpeed inference_context.h
    "deepspeed-workspace": (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  Workspace can't be allocated, no enough memory.\n",
        "cuda-out-of-memory", "high", None),
    # TensorRT logger
    "tensorrt-cuda-runtime-oom": (
        "[03/01/2024-10:00:00] [TRT] [E] 1: [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda "
        "Runtime (out of memory)\n",
        "cuda-out-of-memory", "high", None),
    "tensorrt-requested-amount": (
        "[TRT] [W] Requested amount of GPU memory (8589934592 bytes) could not be allocated. There may "
        "not be enough free memory for allocation to succeed.\n",
        "cuda-out-of-memory", "high", None),
    # accelerate utils/memory.py
    "accelerate-no-executable-batch-size": (
        "RuntimeError: No executable batch size found, reached zero.\n",
        "cuda-out-of-memory", "high", None),
    # torch_npu reporting ACL_ERROR_RT_MEMORY_ALLOCATION
    "npu-error-207001": (
        "RuntimeError: malloc:/usr1/workspace/torch_npu/csrc/core/npu/NPUCachingAllocator.cpp:829 NPU "
        "error, error code is 207001\n",
        "cuda-out-of-memory", "high", None),
    # PaddlePaddle allocator
    "paddle-cannot-allocate-on-gpu": (
        "Cannot allocate 256.000244MB memory on GPU 0, 15.728516GB memory has been allocated and "
        "available memory is only 12.500000MB.\n",
        "cuda-out-of-memory", "high", None),
    # RAPIDS RMM
    "rmm-out-of-memory": (
        "MemoryError: std::bad_alloc: out_of_memory: CUDA error at: /opt/conda/include/rmm/mr/device/"
        "cuda_memory_resource.hpp:60: cudaErrorMemoryAllocation out of memory\n",
        "cuda-out-of-memory", "high", None),
    # SGLang model_runner
    "sglang-mem-fraction": (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n",
        "cuda-out-of-memory", "high", None),
    # MindSpore runtime (graph_scheduler output actor)
    "mindspore-device-memory-not-enough": (
        "[ERROR] DEVICE(4242,ffff,python):2024-03-01-10:00:00.000.000 [mindspore/ccsrc/runtime/"
        "graph_scheduler/actor/output_actor.cc:252] UpdateOutputDeviceAddress] Device(id:0) memory isn't "
        "enough and alloc failed, kernel name: Default/network-WithLossCell/MatMul-op1, alloc size: "
        "8589934592B.\n",
        "cuda-out-of-memory", "high", None),
    # Megatron-Core dist_checkpointing validation (StrictHandling.LOG_ALL)
    "mcore-missing-sharded-keys": (
        "WARNING:megatron.core.dist_checkpointing.validation:Some keys found in the checkpoint are missing "
        "in the provided sharded state dict. Missing keys (for all ranks): {'decoder.layers.self_attention"
        ".linear_qkv.weight'}.\n",
        "checkpoint-layout-mismatch", "low", None),
    # TensorFlow bfc_allocator.cc DumpMemoryLog (INFO lines only, the W/E lines cut off)
    "tf-bfc-dump-info": (
        "2019-04-02 00:54:04.595990: I tensorflow/core/common_runtime/bfc_allocator.cc:641] 7 Chunks of "
        "size 1644167168 totalling 10.72GiB\n"
        "2019-04-02 00:54:04.596001: I tensorflow/core/common_runtime/bfc_allocator.cc:645] Sum Total of "
        "in-use chunks: 13.89GiB\n",
        "cuda-out-of-memory", "high", None),
    # fairseq trainer.py train_step (a WARNING, the run goes on)
    "fairseq-recover-from-oom": (
        "2021-05-01 10:00:00 | WARNING | fairseq.trainer | attempting to recover from OOM in "
        "forward/backward pass\n",
        "cuda-out-of-memory", "high", None),
    # TensorFlow GPU copy whose destination could not be allocated
    "tf-dst-tensor": (
        "tensorflow.python.framework.errors_impl.InternalError: Dst tensor is not initialized.\n",
        "cuda-out-of-memory", "low", None),
    # Arrow plasma (Ray < 1.0 object store)
    "plasma-dev-shm": (
        "F0301 10:00:00.000000 12345 store.cc:1144] System memory request exceeds memory available in "
        "/dev/shm. The request is for 20000000000 bytes, and the amount available is 67108864 bytes.\n",
        "shm-bus-error", "high", None),
    # Ray services.py
    "ray-object-store-exceeds-shm": (
        "ValueError: The configured object store size (15.032385536 GB) exceeds /dev/shm size "
        "(4.500000768 GB). This will harm performance. Consider deleting files in /dev/shm or increasing "
        "its size with --shm-size in Docker.\n",
        "shm-bus-error", "high", None),
    # ZeroMQ's own EADDRINUSE text
    "zmq-address-in-use": (
        "zmq.error.ZMQError: Address in use (addr='tcp://*:5555')\n",
        "address-in-use", "high", None),
    # Python on a German Windows
    "winerror-10048-german": (
        "OSError: [WinError 10048] Normalerweise darf jede Socketadresse (Protokoll, Netzwerkadresse oder "
        "Anschluss) nur jeweils einmal verwendet werden\n",
        "address-in-use", "high", None),
    "winerror-10048-spanish": (
        "ERROR:    [Errno 10048] error while attempting to bind on address ('0.0.0.0', 29500): solo se "
        "permite un uso de cada dirección de socket (protocolo/dirección de red/puerto)\n",
        "address-in-use", "high", None),
    "winerror-10048-japanese": (
        "OSError: [WinError 10048] 通常、各ソケット アドレスに対してプロトコル、ネットワーク アドレス、"
        "またはポートのどれか 1 つのみを使用できます。\n",
        "address-in-use", "high", None),
    # wandb internal_api.py check_retry_fn on a 401
    "wandb-api-key-invalid": (
        "wandb: ERROR The API key you provided is either invalid or missing.  If the `WANDB_API_KEY` "
        "environment variable is set, make sure it is correct.\n",
        "wandb-login", "high", None),
    # the login prompt's choices, cut before the account lines
    "wandb-dont-visualize": (
        "wandb: (3) Don't visualize my results\n",
        "wandb-login", "high", None),
}

# (log text, rule id or None): a neighbouring category's message is not taken by another rule
NEGATIVE = {
    # a model-architecture mismatch (not a sharded flat parameter) raised by load_state_dict is not
    # a layout of its own: the RuntimeError line comes first, so it stays unknown
    "plain-size-mismatch-raised": (
        "RuntimeError: Error(s) in loading state_dict for ResNet:\n"
        "\tsize mismatch for fc.weight: copying a param with shape torch.Size([1000, 2048]) from "
        "checkpoint, the shape in current model is torch.Size([10, 2048]).\n",
        None),
    # OLMo-core's notice on a resharded resume (it goes on) is not a layout failure
    "olmo-rng-notice": (
        "WARNING: Trainer will not restore rank RNG states since the RNG states in the checkpoint "
        "were saved with a different world size.\n",
        None),
    # host memory of a CPU allocator is not device memory
    "cpu-allocator-not-device": (
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: "
        "you tried to allocate 1073741824 bytes.\n",
        "host-oom-or-killed"),
    # Triton's shared-memory limit of a kernel is not an out-of-memory
    "triton-out-of-resource": (
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, "
        "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n",
        None),
    # a full disk (no /dev/shm path) is not the shared-memory limit
    "disk-full-not-shm": (
        "OSError: [Errno 28] No space left on device: '/data/checkpoints/step_1000.pt'\n",
        None),
    # another service's 401 is not wandb's login
    "hf-hub-401": (
        "huggingface_hub.utils._errors.HfHubHTTPError: 401 Client Error: Unauthorized for url: "
        "https://huggingface.co/api/models/org/private\n",
        None),
    # a port that is refused (nobody listens yet) is the rendezvous, not a port in use
    "connection-refused-not-in-use": (
        "ConnectionRefusedError: [Errno 111] Connection refused\n",
        "rendezvous-timeout"),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEGATIVE)
