"""Device, driver and build wordings from their sources (issue 12, rules pass of session 6).

Each log is short and realistic: some training noise, then the message as its source
writes it (where it comes from is said beside it). The tests assert what a user reads:
the rule, the confidence class intended, and the rank when a launcher prefix names one.
Negative cases are a neighbouring category's message that the new wording must not take.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose, to_json

NOISE = "step 10 loss 2.31\nstep 20 loss 2.17\n"


def verdict(tmp_path: Path, text: str) -> tuple[str, str, int | None]:
    log = tmp_path / "job.log"
    log.write_text(NOISE + text + "\n", encoding="utf-8")
    found = to_json(diagnose([log]))
    root = found["causes"][0]
    return root["id"], root["confidence"], root["rank"]


# (rule, confidence, log text). cuda-unavailable and cuda-invalid-device-ordinal are capped
# at medium (a visibility error is often the symptom of a cause elsewhere); a weak wording
# alone is low.
CASES = [
    # torch/cuda/__init__.py (_exchange_device of a build without CUDA), torch 2.x
    ("cuda-unavailable", "medium", "RuntimeError: PyTorch was compiled without CUDA support"),
    # torch/xpu/__init__.py (_exchange_device of a build without XPU)
    ("cuda-unavailable", "medium", "NotImplementedError: PyTorch was compiled without XPU support"),
    # c10 (libtorch_cpu.so string), a CUDA call in a CPU-only build
    ("cuda-unavailable", "medium", "RuntimeError: PyTorch not compiled with CUDA support!"),
    # c10 torch.accelerator API (torch >= 2.6) on a host with no accelerator
    ("cuda-unavailable", "medium",
     "RuntimeError: Cannot access accelerator device when none is available."),
    # ATen (libtorch_cpu.so string): an MPS op on a build without Metal support
    ("cuda-unavailable", "medium",
     "RuntimeError: MPS backend was selected in PyTorch without support"),
    # lightning/pytorch/trainer/connectors/accelerator_connector.py (Lightning 2.x)
    ("cuda-unavailable", "medium",
     "lightning.fabric.utilities.exceptions.MisconfigurationException: `CUDAAccelerator` can "
     "not run on your system since the accelerator is not available. The following "
     "accelerator(s) is available and can be passed into `accelerator` argument of `Trainer`: "
     "['cpu']."),
    # older Lightning device parser (pytorch_lightning/utilities/device_parser.py): no GPU at all
    ("cuda-unavailable", "medium",
     "pytorch_lightning.utilities.exceptions.MisconfigurationException: \n"
     "                You requested gpu: [0]\n"
     "                But your machine only has: []"),
    # accelerate/accelerator.py before the device list (accelerate 0.1x)
    ("cuda-unavailable", "medium", "ValueError: fp16 mixed precision requires a GPU (not 'mps')."),
    # transformers/training_args.py __post_init__ (4.2x-4.3x)
    ("cuda-unavailable", "medium",
     "ValueError: FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half "
     "precision evaluation (`--fp16_full_eval`) can only be used on CUDA or NPU devices or "
     "certain XPU devices (with IPEX)."),
    ("cuda-unavailable", "medium",
     "ValueError: FP16 Mixed precision training with AMP or APEX (`--fp16`) and FP16 half "
     "precision evaluation (`--fp16_full_eval`) can only be used on CUDA devices."),
    # accelerate/utils/bnb.py, transformers/quantizers/quantizer_eetq.py
    ("cuda-unavailable", "medium", "RuntimeError: No GPU found. A GPU is needed for quantization."),
    ("cuda-unavailable", "medium",
     "RuntimeError: No GPU or Intel XPU found. A GPU or Intel XPU is needed for quantization."),
    # transformers/quantizers/quantizer_gptq.py, trainer_utils.py
    ("cuda-unavailable", "medium", "RuntimeError: GPU is required to quantize or run quantize model."),
    ("cuda-unavailable", "medium", "ValueError: No available GPU device found!"),
    # jax/_src/xla_bridge.py canonicalize_platform and backends (XLA's FAILED_PRECONDITION)
    ("cuda-unavailable", "medium",
     "RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of "
     "gpu are present. Platforms present are: cpu"),
    ("cuda-unavailable", "medium",
     "RuntimeError: Backend 'cuda' failed to initialize: FAILED_PRECONDITION: No visible GPU "
     "devices.. Available backends are ['cpu']"),
    # HIP hipGetErrorString(hipErrorNoDevice) as torch's ROCm build raises it
    ("cuda-unavailable", "medium", "RuntimeError: HIP error: no ROCm-capable device is detected"),
    # rocminfo / ROCr in a container started without --device=/dev/kfd
    ("cuda-unavailable", "medium",
     "ROCk module is NOT loaded, possibly no GPU devices\n"
     "Unable to open /dev/kfd read-write: No such file or directory"),
    # CUDA < 10 cudaGetErrorString(cudaErrorDevicesUnavailable)
    ("cuda-unavailable", "medium",
     "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"),
    # Docker without the NVIDIA Container Toolkit / without a driver on the host
    ("cuda-unavailable", "medium",
     'docker: Error response from daemon: could not select device driver "" with capabilities: '
     "[[gpu]]."),
    ("cuda-unavailable", "medium",
     "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
     "runc create failed: unable to start container process: error during container init: error "
     "running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode "
     "as 'legacy'\nnvidia-container-cli: initialization error: nvml error: driver not loaded: "
     "unknown."),
    # the SYCL runtime (Intel GPU stack) with no usable device
    ("cuda-unavailable", "medium",
     "terminate called after throwing an instance of 'sycl::_V1::runtime_error'\n"
     "  what():  No device of requested type available."),
    # vLLM platform detection (vllm/config.py DeviceConfig)
    ("cuda-unavailable", "medium", "RuntimeError: Failed to infer device type"),
    # Enflame TopsRider and Moore Threads MUSA name their errors like HIP/CUDA (topsError_t)
    ("cuda-unavailable", "medium", "RuntimeError: topsGetDeviceCount failed: topsErrorNoDevice"),
    # cudaErrorSystemNotReady as torch reports it (c10/cuda/CUDAFunctions.cpp): no fabric manager
    ("cuda-unavailable", "medium",
     "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:107: UserWarning: CUDA "
     "initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
     "before calling NumCudaDevices() that might have already set an error? Error 802: system not "
     "yet initialized (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)"),
    ("cuda-unavailable", "medium",
     "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorSystemNotReady: system not yet "
     "initialized"),
    # NVML (nvidia-smi in a container that lost its devices; pynvml without a driver)
    ("cuda-unavailable", "medium", "Failed to initialize NVML: Unknown Error"),
    ("cuda-unavailable", "medium", "pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded"),
    ("cuda-unavailable", "medium", "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found"),
    # ATen CUDAHooksInterface of a build without CUDA (libtorch_cpu.so string)
    ("cuda-unavailable", "medium",
     "RuntimeError: Cannot initialize CUDA without ATen_cuda library. PyTorch splits its backend "
     "into two shared libraries: a CPU library and a CUDA library; this error has occurred because "
     "you are trying to use some CUDA functionality, but the CUDA library has not been loaded by "
     "the dynamic linker for some reason."),
    # libtpu with the chips held by another process
    ("cuda-unavailable", "medium",
     "RuntimeError: TPU initialization failed: open(/dev/accel0): Device or resource busy: Device "
     "or resource busy; Couldn't open device: /dev/accel0"),
    # Intel Gaudi synapse_helpers (habana_frameworks): no free HPU module
    ("cuda-unavailable", "medium",
     "RuntimeError: synStatus=8 [Device not found] Device acquire failed."),
    # jax/_src/xla_bridge.py warning (the job goes on, on the CPU): weak
    ("cuda-unavailable", "low",
     "WARNING:jax._src.xla_bridge:An NVIDIA GPU may be present on this machine, but a "
     "CUDA-enabled jaxlib is not installed. Falling back to cpu."),
    # torch/amp/grad_scaler.py and autocast_mode.py warnings: weak
    ("cuda-unavailable", "low",
     "/site-packages/torch/amp/grad_scaler.py:132: UserWarning: torch.cuda.amp.GradScaler is "
     "enabled, but CUDA is not available.  Disabling."),
    ("cuda-unavailable", "low",
     "/site-packages/torch/amp/autocast_mode.py:266: UserWarning: User provided device_type of "
     "'cuda', but CUDA is not available. Disabling"),
    # NVML's library missing: no NVIDIA driver installed (weak, like libcuda)
    ("cuda-unavailable", "low",
     "OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory"),
    # a job script's check on a host without the NVIDIA driver: weak
    ("cuda-unavailable", "low", "run.sh: line 3: nvidia-smi: command not found"),
    ("cuda-unavailable", "low",
     "'nvidia-smi' is not recognized as an internal or external command,"),
    # ROCm libraries, CANN, Neuware, MUSA, oneCCL missing from the loader path
    ("nccl-cuda-library-mismatch", "high",
     "ImportError: librocsolver.so.0: cannot open shared object file: No such file or directory"),
    ("nccl-cuda-library-mismatch", "high",
     "ImportError: libhccl.so: cannot open shared object file: No such file or directory"),
    ("nccl-cuda-library-mismatch", "high",
     "OSError: libcnrt.so: cannot open shared object file: No such file or directory"),
    ("nccl-cuda-library-mismatch", "high",
     "ImportError: libmusart.so.2: cannot open shared object file: No such file or directory"),
    ("nccl-cuda-library-mismatch", "high",
     "ImportError: libccl.so.1: cannot open shared object file: No such file or directory"),
    ("nccl-cuda-library-mismatch", "high",
     "ImportError: /opt/venv/lib/python3.10/site-packages/torch/lib/libtorch_hip.so: undefined "
     "symbol: hipblasLtMatmul"),
    # intel_extension_for_pytorch/__init__.py version check
    ("nccl-cuda-library-mismatch", "high",
     "ERROR! Intel\u00ae Extension for PyTorch* needs to work with PyTorch 2.8.*, but PyTorch "
     "2.6.0+cu124 is found. Please switch to the matching version and run again."),
    # jaxlib/plugin_support.py: the CUDA plugin of another release is not used
    ("nccl-cuda-library-mismatch", "high",
     "/usr/local/lib/python3.12/dist-packages/jaxlib/plugin_support.py:71: RuntimeWarning: JAX "
     "plugin jax_cuda12_plugin version 0.7.2 is installed, but it is not compatible with the "
     "installed jaxlib version 0.7.1, so it will not be used."),
    # an extension build (torch.utils.cpp_extension) whose ninja step failed: weak
    ("nccl-cuda-library-mismatch", "low", "ninja: build stopped: subcommand failed."),
    # torch/distributed/rpc TensorPipe agent (libtorch_cpu.so string)
    ("backend-device-unsupported", "high",
     "RuntimeError: TensorPipe RPC backend only supports CPU tensors by default, please move your "
     "tensors to CPU before sending them over RPC, or call `set_device_map` on "
     "`TensorPipeRpcBackendOptions` to explicitly configure device mapping."),
    # torch/cuda/__init__.py _lazy_init
    ("nccl-cuda-library-mismatch", "high",
     "AssertionError: libcudart functions unavailable. It looks like you have a broken build?"),
    # CUDA driver API names (cuda.h CUresult)
    ("nccl-cuda-library-mismatch", "high",
     "failed call to cuInit: CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    ("nccl-cuda-library-mismatch", "high", "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid"),
    # bitsandbytes cuda_setup/main.py (0.3x-0.41)
    ("nccl-cuda-library-mismatch", "high",
     "CUDA SETUP: PyTorch settings found: CUDA_VERSION=126, Highest Compute Capability: 8.6.\n"
     "CUDA SETUP: Required library version not found: libbitsandbytes_cuda126.so. Maybe you need "
     "to compile it from source?\nCUDA SETUP: Defaulting to libbitsandbytes_cpu.so..."),
    ("nccl-cuda-library-mismatch", "low", "CUDA SETUP: CUDA detection failed! Possible reasons:"),
    # torch >= 2.7 wheels link NVSHMEM (nvidia-nvshmem-cu12)
    ("nccl-cuda-library-mismatch", "high",
     "ImportError: libnvshmem_host.so.3: cannot open shared object file: No such file or directory"),
    # ptxas older than the PTX (JAX's CUDA plugin, numba) or than the GPU (Triton)
    ("nccl-cuda-library-mismatch", "high",
     "jax.errors.JaxRuntimeError: INTERNAL: CUDA error: ptxas application ptx input, line 5;\n"
     "fatal   : Unsupported .version 8.8; current version is '8.2'"),
    ("nccl-cuda-library-mismatch", "high",
     "ptxas fatal   : Value 'sm_103a' is not defined for option 'gpu-name'"),
    # cudaGetErrorString(cudaErrorInvalidPtx): weak (a bad kernel gives it too)
    ("nccl-cuda-library-mismatch", "low", "RuntimeError: CUDA error: a PTX JIT compilation failed"),
    # xformers/_cpp_lib.py: weak
    ("nccl-cuda-library-mismatch", "low",
     "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions."),
    ("nccl-cuda-library-mismatch", "low", "RuntimeError: topsInit failed: topsErrorInsufficientDriver"),
    # MUSA's invalid device (musaError_t mirrors cudaError_t)
    ("cuda-invalid-device-ordinal", "medium",
     "RuntimeError: musaSetDevice(7) failed: musaErrorInvalidDevice"),
    # lightning/fabric/accelerators/xla.py: more TPU cores than the host has
    ("cuda-invalid-device-ordinal", "medium",
     "ValueError: `devices` can only be 'auto', 1, 8 or [<0-7>] for TPUs. Got 16"),
    # torch/distributed/distributed_c10d.py all_reduce with MAX on a complex tensor
    ("backend-device-unsupported", "high",
     "ValueError: all_reduce does not support ReduceOp.MAX on complex tensors"),
    ("backend-device-unsupported", "high",
     "AssertionError: Unknown c10d backend type NCCLX"),
    # CANN: HCCL's internal error code
    ("ascend-hccl", "medium",
"EI9999: Inner Error!"),
    # xla/tsl coordination_service.cc: the service (inside process 0) reports task 0 itself
    ("jax-coordination", "medium",
     "E1009 15:47:38.568412 coordination_service.cc:1170] /job:jax_worker/replica:0/task:0 has "
     "been set to ERROR in coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/"
     "task:0 heartbeat timeout. This indicates that the remote task has failed, got preempted, "
     "or crashed unexpectedly. Check the task logs for an earlier error or scheduler events "
     "(e.g. preemption, eviction) to debug further."),
    # xla/pjrt/distributed/topology_util.cc: a process never published its devices
    ("jax-coordination", "medium",
     "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Getting local topologies failed: Error 1: "
     "GetKeyValue() timed out with key: cuda:local_topology/cuda/3 and duration: 2m"),
    # coordination_service.cc after the service shut down (secondary)
    ("jax-task-died", "medium",
     "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Coordination service has stopped. "
     "RecordHeartbeat() from task: /job:jax_worker/replica:0/task:2 failed. Additional GRPC error "
     "information from remote target coordination_service while calling "
     "/tensorflow.CoordinationService/Heartbeat"),
    # xla/tsl coordination_service.cc: a task that restarted (secondary: only consequences)
    ("jax-task-died", "medium",
     "jax.errors.JaxRuntimeError: ABORTED: /job:jax_worker/replica:0/task:5 unexpectedly tried "
     "to connect with a different incarnation. It has likely restarted."),
    ("jax-task-died", "medium",
     "ABORTED: /job:jax_worker/replica:0/task:3 Heartbeat: Incarnation ID mismatch: expecting 11 "
     "but got 12. The task has restarted and likely crashed earlier - check for any earlier "
     "errors or any scheduler events (e.g. preemption, eviction) to debug further."),
]


@pytest.mark.parametrize(("rule", "confidence", "text"), CASES)
def test_source_wording_names_its_category(
    tmp_path: Path, rule: str, confidence: str, text: str
) -> None:
    assert verdict(tmp_path, text)[:2] == (rule, confidence)


# A neighbouring category's message that the new wordings must leave alone.
NEIGHBOURS = [
    # Lightning listing a device: more GPUs asked for than present is an ordinal, not no GPU
    ("cuda-invalid-device-ordinal",
     "pytorch_lightning.utilities.exceptions.MisconfigurationException: \n"
     "                You requested gpu: [0, 1]\n"
     "                But your machine only has: [0]"),
    # HIP's other errors are not "no device"
    ("cuda-invalid-device-ordinal", "RuntimeError: HIP error: invalid device ordinal"),
    ("nccl-cuda-library-mismatch", "RuntimeError: HIP error: invalid device function"),
    # an old driver (torch/cuda/__init__.py _check_driver) is the library category
    ("nccl-cuda-library-mismatch",
     "AssertionError: The NVIDIA driver on your system is too old (found version 10010)."),
    # JAX's version check inside its backend error is the library category
    ("nccl-cuda-library-mismatch",
     "CUDA backend failed to initialize: Found cuDNN version 8600, but JAX was built against "
     "version 8900, which is newer."),
    # HCCL's own failure stays Ascend's, the missing libhccl is the build
    ("ascend-hccl", "RuntimeError: HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp"),
    # the CUDA plugin skipped for its version, then the GPU asked for: the version is the cause
    ("nccl-cuda-library-mismatch",
     "RuntimeWarning: JAX plugin jax_cuda12_plugin version 0.7.2 is installed, but it is not "
     "compatible with the installed jaxlib version 0.7.1, so it will not be used.\n"
     "RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances of gpu "
     "are present. Platforms present are: cpu"),
    # a driver/library mismatch reported by NVML is the library category, not a missing driver
    ("nccl-cuda-library-mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
    # another task's heartbeat timeout is that task dying
    ("jax-task-died",
     "E1115 coordination_service.cc:954] /job:jax_worker/replica:0/task:10 has been set to ERROR "
     "in coordination service: UNAVAILABLE: Task /job:jax_worker/replica:0/task:10 heartbeat "
     "timeout. This indicates that the remote task has failed, got preempted, or crashed "
     "unexpectedly."),
]


@pytest.mark.parametrize(("rule", "text"), NEIGHBOURS)
def test_neighbouring_category_keeps_its_rule(tmp_path: Path, rule: str, text: str) -> None:
    assert verdict(tmp_path, text)[0] == rule


def test_docker_without_gpu_selection_is_not_the_gpu_driver(tmp_path: Path) -> None:
    # the same daemon error for another capability is not about GPUs
    log = tmp_path / "job.log"
    log.write_text(NOISE + 'docker: Error response from daemon: could not select device driver '
                   '"" with capabilities: [[compute]].\n', encoding="utf-8")
    causes = to_json(diagnose([log]))["causes"]
    assert not causes or causes[0]["id"] != "cuda-unavailable"


def test_another_subsystem_not_yet_initialised_is_not_the_gpu(tmp_path: Path) -> None:
    # only CUDA's error 802 wording names the GPU; the phrase alone is any subsystem's
    log = tmp_path / "job.log"
    log.write_text(NOISE + "RuntimeError: logging system not yet initialized\n", encoding="utf-8")
    causes = to_json(diagnose([log]))["causes"]
    assert not causes or causes[0]["id"] != "cuda-unavailable"


def test_bf16_without_support_is_not_no_gpu(tmp_path: Path) -> None:
    # accelerate's bf16 check fails on old GPUs as well as without one: not this rule's
    log = tmp_path / "job.log"
    log.write_text(NOISE + "ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a "
                   "supported device.\n", encoding="utf-8")
    causes = to_json(diagnose([log]))["causes"]
    assert not causes or causes[0]["id"] != "cuda-unavailable"


@pytest.mark.parametrize(("rule", "text"), [
    ("cuda-unavailable", "RuntimeError: HIP error: no ROCm-capable device is detected"),
    ("cuda-unavailable", "RuntimeError: Cannot access accelerator device when none is available."),
    ("nccl-cuda-library-mismatch",
     "ImportError: libhccl.so: cannot open shared object file: No such file or directory"),
    ("cuda-invalid-device-ordinal", "RuntimeError: musaSetDevice(7) failed: musaErrorInvalidDevice"),
])
def test_the_prefix_names_the_rank(tmp_path: Path, rule: str, text: str) -> None:
    found = verdict(tmp_path, f"[rank3]: Traceback (most recent call last):\n[rank3]: {text}")
    assert (found[0], found[2]) == (rule, 3)


def test_a_lightning_excerpt_with_no_device_names_the_fix_for_no_gpu(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(NOISE + "MisconfigurationException('You requested gpu: [0]\\n But your "
                   "machine only has: []')\n", encoding="utf-8")
    root = to_json(diagnose([log]))["causes"][0]
    assert root["id"] == "cuda-unavailable"
    assert any("--device cpu" in step for step in root["fix"])


def test_libibverbs_probing_its_providers_names_no_library_mismatch(tmp_path: Path) -> None:
    # rdma-core's provider probe (libibverbs dynamic_driver.c) at NCCL start-up is not the
    # cause of the collective timeout that follows
    log = tmp_path / "job.log"
    log.write_text(
        "libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so': libmlx5-rdmav34.so: "
        "cannot open shared object file: No such file or directory\n" + NOISE
        + "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600123 milliseconds before timing out.\n", encoding="utf-8")
    assert to_json(diagnose([log]))["causes"][0]["id"] == "collective-timeout"


def test_an_hccl_watchdog_timeout_is_a_consequence_not_an_ascend_cause(tmp_path: Path) -> None:
    # torch_npu's ProcessGroupHCCL watchdog (its c10 log prefix names the source file): a timeout
    # is what the other ranks see, so it must not be taken as an Ascend device/HCCL cause.
    rule, confidence, rank = verdict(tmp_path, (
        "[rank1]:[E ProcessGroupHCCL.cpp:561] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkHCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800123 "
        "milliseconds before timing out."))
    assert (rule, rank) == ("collective-timeout", 1)
    assert confidence != "high"
