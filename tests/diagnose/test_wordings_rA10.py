"""Wordings of the library-mismatch, no-device, device-ordinal, backend/device, duplicate-GPU,
Ascend and exit-time rules that are not "Error:" lines: loader messages, driver and kernel-module
lines, WARN lines, status codes and warnings (rule writer rA10).

Each log is short and built around the real message; the comment names where the message comes
from. Assertions are what the user sees: the rule, how sure, the rank. The negative cases are a
neighbouring category's message that the new patterns must not take.
"""

from __future__ import annotations

from tests.diagnose.wording import wording_tests

# (log text, rule id, confidence, rank or None)
CASES = {
    # ---- nccl-cuda-library-mismatch ----
    # jaxlib/cuda/versions_helpers.cc (jax 0.4.3x): a CUDA library of the jaxlib build absent,
    # reported by the plugin's version check at backend init
    "jax-cusparse-library-not-found": (
        "ERROR:2025-12-31 23:18:19,440:jax._src.xla_bridge:475: Jax plugin configuration error: "
        "Exception when calling jax_plugins.xla_cuda12.initialize()\n"
        "RuntimeError: jaxlib/cuda/versions_helpers.cc:81: operation cusparseGetProperty(MAJOR_VERSION, "
        "&major) failed: The cuSPARSE library was not found.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NCCL src/misc/cudawrap.cc initOnceFunc: a driver without cuGetProcAddress (older than 11.3)
    "nccl-missing-symbol-cugetprocaddress": (
        "node1:12:12 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:12:12 [0] misc/cudawrap.cc:107 NCCL WARN Failed to load CUDA missing symbol "
        "cuGetProcAddress\n",
        "nccl-cuda-library-mismatch", "high", None),
    # torch/_inductor/scheduler.py (torch.compile on a GPU below sm_70), under a torchrun prefix
    "inductor-gpu-too-old-for-triton": (
        "[rank1]: torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "[rank1]: RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by the "
        "triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA "
        "Capability >= 7.0, but your device is of CUDA capability 6.0\n",
        "nccl-cuda-library-mismatch", "high", 1),
    # the NVIDIA kernel module (nv.c, dmesg): user-space driver and module of different releases
    "nvrm-api-mismatch-dmesg": (
        "[  52.396206] NVRM: API mismatch: the client has the version 535.171.04, but\n"
        "               NVRM: this kernel module has the version 535.161.07.  Please\n"
        "               NVRM: make sure that this kernel module and all NVIDIA driver\n",
        "nccl-cuda-library-mismatch", "high", None),
    # THC (torch 0.4) on a GPU the build has no code for
    "thc-invalid-device-function": (
        "THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCTensorMath.cu line=15 error=8 : "
        "invalid device function\n"
        "RuntimeError: cuda runtime error (8) : invalid device function at "
        "/pytorch/aten/src/THC/generic/THCTensorMath.cu:15\n",
        "nccl-cuda-library-mismatch", "high", None),
    # HIP's enum names (hip_runtime_api.h) as CuPy / hipified code prints them
    "hip-invalid-device-function-enum": (
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: hipErrorInvalidDeviceFunction: "
        "invalid device function\n",
        "nccl-cuda-library-mismatch", "high", None),
    # torch_npu/utils cann_package_check: the toolkit's set_env.sh not sourced
    "cann-set-env-not-sourced": (
        "Exception: ASCEND_COMPILER_PATH : /usr/local/Ascend/ascend-toolkit/latest/compiler does not "
        "exist. Please check whether the compiler package has been installed. If exist, please run "
        "'source set_env.sh' in the CANN installation path.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # cuDNN 8 on Windows loading its sub-libraries at the first convolution
    "windows-cudnn-sublibrary": (
        "Could not load library cudnn_cnn_infer64_8.dll. Error code 126\n"
        "Please make sure cudnn_cnn_infer64_8.dll is in your library path!\n",
        "nccl-cuda-library-mismatch", "high", None),
    # a torch 1.x extension against another torch (the caffe2 namespace)
    "caffe2-mangled-undefined-symbol": (
        "ImportError: /usr/lib/python3/site-packages/apex/amp_C.cpython-37m-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN6caffe28TypeMeta21_typeMetaDataInstanceIN3c108BFloat16EEEPKNS_6detail12"
        "TypeMetaDataEv\n",
        "nccl-cuda-library-mismatch", "high", None),
    # intel_extension_for_pytorch (xpu) against another torch
    "ipex-gpu-library-undefined-symbol": (
        "OSError: /opt/venv/lib/python3.10/site-packages/intel_extension_for_pytorch/lib/"
        "libintel-ext-pt-gpu.so: undefined symbol: ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE\n",
        "nccl-cuda-library-mismatch", "high", None),
    # conda torch without its MKL runtime
    "mkl-runtime-missing": (
        "ImportError: libmkl_intel_lp64.so.1: cannot open shared object file: No such file or "
        "directory\n",
        "nccl-cuda-library-mismatch", "high", None),
    # CANN runtime library of the driver/toolkit not on the loader path
    "cann-c-sec-missing": (
        "ImportError: libc_sec.so: cannot open shared object file: No such file or directory. "
        "Please check that the cann package is installed.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # TensorFlow core/common_runtime/gpu/gpu_device.cc: the warning alone, the job went on on CPU
    "tf-cannot-dlopen-gpu-libraries": (
        "2021-06-24 23:59:50.228134: W tensorflow/core/common_runtime/gpu/gpu_device.cc:1598] Cannot "
        "dlopen some GPU libraries. Please make sure the missing libraries mentioned above are "
        "installed properly if you would like to use GPU.\n"
        "Skipping registering GPU devices...\n",
        "nccl-cuda-library-mismatch", "low", None),
    # torch_npu cann_package_check warning alone
    "cann-torch-npu-version-warning": (
        "Warning : CANN package version 6.0.RC1 and PyTorch version 1.11.0.post1 is not matched, "
        "please check the README of the ascend pytorch repo.\n",
        "nccl-cuda-library-mismatch", "low", None),
    # flash-attn csrc/flash_attn/flash_api.cpp on a pre-Ampere GPU
    "flash-attn-ampere-only": (
        "RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n",
        "nccl-cuda-library-mismatch", "low", None),
    # NCCL cudawrap.cc: libcuda is the stub (error 34)
    "nccl-cudrivergetversion-failed": (
        "node1:9:9 [0] misc/cudawrap.cc:89 NCCL WARN cuDriverGetVersion failed with 34\n",
        "nccl-cuda-library-mismatch", "low", None),

    # libnvidia-container writes NVML's "Driver/library version mismatch" in lower case
    "container-cli-driver-library-mismatch": (
        "docker: Error response from daemon: failed to create task for container: failed to create "
        "shim task: OCI runtime create failed: runc create failed: unable to start container process: "
        "error during container init: error running hook #0: error running hook: exit status 1, "
        "stdout: , stderr: nvidia-container-cli: initialization error: nvml error: driver/library "
        "version mismatch: unknown.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # torch 0.4-1.x own libraries of another build left on the path
    "torch-aten-undefined-symbol": (
        "  File \"/usr/local/lib/python2.7/dist-packages/torch/__init__.py\", line 80, in <module>\n"
        "    from torch._C import *\n"
        "ImportError: /usr/local/lib/python2.7/dist-packages/torch/lib/libATen.so.1: undefined symbol: "
        "THNN_CudaDoubleSpatialClassNLLCriterion_updateGradInput\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NCCL CUDACHECK and nccl-tests: NCCL or the tests built without code for this GPU
    "nccl-cuda-failure-invalid-device-function": (
        "node1:4:4 [0] enqueue.cc:215 NCCL WARN Cuda failure 'invalid device function'\n",
        "nccl-cuda-library-mismatch", "high", None),
    "nccl-tests-invalid-device-function": (
        "node1: Test CUDA failure common.cu:892 'invalid device function'\n",
        "nccl-cuda-library-mismatch", "high", None),
    # DeepSpeed op_builder/builder.py assert_no_cuda_mismatch / assert_torch_info
    "deepspeed-cuda-mismatch-exception": (
        "deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed "
        "CUDA version 11.8 does not match the version torch was compiled with 12.4, unable to compile "
        "cuda/cpp extensions without a matching cuda version.\n",
        "nccl-cuda-library-mismatch", "high", None),
    "deepspeed-prebuilt-ops-mismatch": (
        "RuntimeError: PyTorch and CUDA version mismatch! DeepSpeed ops were compiled and installed "
        "with a different version than what is being used at runtime. Please re-install DeepSpeed or "
        "switch torch versions. Install torch version=2.1, Runtime torch version=2.3\n",
        "nccl-cuda-library-mismatch", "high", None),
    # PaddlePaddle platform/dynload/dynamic_loader.cc on Windows (error 126: the DLL not found)
    "paddle-cudnn-dll-not-configured": (
        "RuntimeError: (PreconditionNotMet) The third-party dynamic library (cudnn64_8.dll) that "
        "Paddle depends on is not configured correctly. (error code is 126)\n"
        "  Suggestions:\n"
        "  1. Check if the third-party dynamic library (e.g. CUDA, CUDNN) is installed correctly and "
        "its version is matched with paddlepaddle you installed.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # PaddlePaddle ExternalError with the runtime's enum in its hint
    "paddle-invalid-device-function": (
        "ExternalError: CUDA error(98), invalid device function.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # PaddlePaddle gpu_resources.cc version warning alone (runs that then work print it too)
    "paddle-cudnn-version-warning": (
        "W1114 22:57:33.949204    32 device_context.h:397] WARNING: device: 0. The installed Paddle is "
        "compiled with CUDNN 8.1, but CUDNN version in your machine is 8.0, which may cause serious "
        "incompatible bug. Please recompile or reinstall Paddle with compatible CUDNN version.\n",
        "nccl-cuda-library-mismatch", "low", None),
    # TensorFlow common_runtime/gpu/gpu_device.cc with another CUDA release's libcudart first
    "tf-cudageterrorstring-symbol": (
        "tensorflow.python.framework.errors_impl.InternalError: cudaGetDevice() failed. Status: "
        "cudaGetErrorString symbol not found\n",
        "nccl-cuda-library-mismatch", "high", None),
    # glibc's dlerror in a zh_CN / de / fr / ja locale
    "zh-cudart-missing": (
        "ImportError: libcudart.so.11.0: 无法打开共享对象文件: 没有那个文件或目录\n",
        "nccl-cuda-library-mismatch", "high", None),
    "de-nccl-missing": (
        "OSError: libnccl.so.2: Kann die Shared-Object-Datei nicht öffnen: Datei oder Verzeichnis nicht "
        "gefunden\n",
        "nccl-cuda-library-mismatch", "high", None),
    "fr-cudnn-missing": (
        "ImportError: libcudnn.so.8: Ne peut ouvrir le fichier d'objet partagé: Aucun fichier ou "
        "dossier de ce type\n",
        "nccl-cuda-library-mismatch", "high", None),
    "ja-torch-cuda-missing": (
        "ImportError: libtorch_cuda.so: 共有オブジェクトファイルを開けません: "
        "そのようなファイルやディレクトリはありません\n",
        "nccl-cuda-library-mismatch", "high", None),
    # any other library in those locales: as weak as the English "cannot open shared object file"
    "zh-other-library-missing": (
        "ImportError: libgomp.so.1: 无法打开共享对象文件: 没有那个文件或目录\n",
        "nccl-cuda-library-mismatch", "low", None),

    # ---- cuda-unavailable ----
    # Cambricon CNRT (cnrt.h): no MLU found
    "cambricon-no-device": (
        "RuntimeError: CNRT error: cnrtErrorNoDevice: no device is found\n",
        "cuda-unavailable", "medium", None),
    # the driver library itself in a zh_CN locale (no NVIDIA driver), as the English weak wording
    "zh-libcuda-missing": (
        "ImportError: libcuda.so.1: 无法打开共享对象文件: 没有那个文件或目录\n",
        "cuda-unavailable", "low", None),
    # torch/cuda/_utils.py _get_device_index after a script fell back to the CPU device
    "cuda-call-given-cpu-device": (
        "  File \"torch/cuda/__init__.py\", line 397, in set_device\n"
        "    device = _get_device_index(device)\n"
        "ValueError: Expected a cuda device, but got: cpu\n",
        "cuda-unavailable", "low", None),
    # c10/core/Device.cpp: "npu" asked for without torch_npu
    "device-string-npu-without-plugin": (
        "RuntimeError: Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, "
        "fpga, ort, xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of "
        "device string: npu\n",
        "cuda-unavailable", "low", None),
    # torch/distributed/fsdp/_init_utils.py (FSDP1) on a host without an accelerator
    "fsdp-needs-accelerator": (
        "  File \"torch/distributed/fsdp/_init_utils.py\", line 525, in _get_compute_device\n"
        "RuntimeError: FSDP needs a non-CPU accelerator device, but no accelerator device is "
        "detected.\n",
        "cuda-unavailable", "medium", None),
    # intel_extension_for_pytorch (xpu) runtime with no Intel GPU visible to SYCL
    "ipex-no-dpcpp-devices": (
        "RuntimeError: Number of dpcpp devices should be greater than zero!\n",
        "cuda-unavailable", "medium", None),
    # numba cuda/cudadrv/driver.py
    "numba-cuda-driver-not-found": (
        "numba.cuda.cudadrv.error.CudaSupportError: Error at driver init:\n"
        "CUDA driver library cannot be found.\n"
        "If you are sure that a CUDA driver is installed,\n",
        "cuda-unavailable", "medium", None),
    # Docker without the NVIDIA runtime configured
    "docker-no-nvidia-runtime": (
        "docker: Error response from daemon: unknown or invalid runtime name: nvidia.\n"
        "See 'docker run --help'.\n",
        "cuda-unavailable", "medium", None),
    # the NVIDIA kernel module ignoring a GPU that needs a legacy branch (dmesg)
    "nvrm-legacy-gpu-ignored": (
        "NVRM: The NVIDIA GeForce 920M GPU installed in this system is\n"
        "NVRM:  supported through the NVIDIA 470.xx Legacy drivers. Please\n"
        "NVRM:  visit http://www.nvidia.com/object/unix.html for more\n"
        "NVRM:  information.  The 565.57.01 NVIDIA driver will ignore\n"
        "NVRM:  this GPU.  Continuing probe...\n"
        "NVRM: No NVIDIA GPU found.\n",
        "cuda-unavailable", "medium", None),
    # the legacy-branch line alone (the module may still drive another GPU of the host)
    "nvrm-legacy-gpu-alone": (
        "NVRM: The NVIDIA GeForce 920M GPU installed in this system is\n"
        "NVRM:  supported through the NVIDIA 470.xx Legacy drivers. Please\n",
        "cuda-unavailable", "low", None),
    # modprobe when the module cannot load (secure boot, kernel update without DKMS rebuild)
    "modprobe-nvidia": (
        "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n",
        "cuda-unavailable", "medium", None),
    # nvidia-smi in a container without the driver's NVML mounted
    "nvidia-smi-no-nvml": (
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the "
        "NVIDIA Display Driver is properly installed and present in your system.\n",
        "cuda-unavailable", "medium", None),
    # amdsmi (ROCm 6) without the amdgpu kernel driver
    "amdsmi-driver-not-loaded": (
        "amdsmi.amdsmi_exception.AmdSmiLibraryException: Error code:\n"
        "\t34 | AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded\n",
        "cuda-unavailable", "medium", None),
    # nvidia-smi with the driver loaded and no GPU visible (a job script's first command)
    "nvidia-smi-no-devices": (
        "+ nvidia-smi\n"
        "No devices were found\n"
        "+ torchrun --nproc_per_node=8 train.py\n",
        "cuda-unavailable", "low", None),
    # rocBLAS with no usable GPU
    "rocblas-tensile-no-devices": (
        "rocBLAS error: Could not initialize Tensile host: No devices found\n",
        "cuda-unavailable", "low", None),

    # ---- backend-device-unsupported ----
    # torch ProcessGroupNCCL.cpp allreduce (2.3+) with a float8 tensor
    "nccl-float8-reduction": (
        "[rank0]: RuntimeError: Float8 dtypes are not currenlty supported for NCCL reductions\n",
        "backend-device-unsupported", "high", 0),
    # torch_npu csrc/distributed/HCCLUtils.cpp getHcclDataType
    "hccl-unsupported-data-type": (
        "RuntimeError: Unsupported data type for HCCL process group[ERROR] 2024-05-01-10:00:00 "
        "(PID:1234, Device:0, RankID:0) ERR02005 DIST internal error\n",
        "backend-device-unsupported", "high", None),
    # Habana ProcessGroupHCCL getHCCLReduceOp (ReduceOp.AVG/PREMUL_SUM)
    "habana-unsupported-reduceop": (
        "RuntimeError: Unsupported ReduceOp for HCCL process group\n",
        "backend-device-unsupported", "high", None),
    # NCCL src/enqueue.cc ArgsCheck with bfloat16 on NCCL < 2.10
    "nccl-argscheck-invalid-type": (
        "node1:7:7 [0] enqueue.cc:1012 NCCL WARN AllReduce : invalid type 9\n"
        "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, invalid argument, "
        "NCCL version 2.7.8\n",
        "backend-device-unsupported", "high", None),
    # the dispatcher: an out-of-tree device that registered no c10d kernels
    "c10d-op-no-privateuse1-kernel": (
        "NotImplementedError: Could not run 'c10d::allreduce_' with arguments from the 'PrivateUse1' "
        "backend. This could be because the operator doesn't exist for this backend.\n",
        "backend-device-unsupported", "high", None),
    # horovod/runner/launch.py
    "horovod-no-controller-built": (
        "ValueError: Neither MPI nor Gloo support has been built. Try reinstalling Horovod ensuring "
        "that either MPI is installed (MPI) or CMake is installed (Gloo).\n",
        "backend-device-unsupported", "high", None),

    # ---- duplicate-gpu ----
    # CuPy's NCCL bindings (cupy_backends/cuda/libs/nccl.pyx) at NcclCommunicator init
    "cupy-nccl-invalid-usage": (
        "cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_INVALID_USAGE: invalid usage\n",
        "duplicate-gpu", "low", None),
    # PaddlePaddle's NCCL check (enforce.h) with its hint line
    "paddle-nccl-invalid-usage": (
        "OSError: (External) NCCL error(5), invalid usage.\n"
        "  [Hint: 'ncclInvalidUsage'. The call to NCCL is incorrect. This is usually reflecting a "
        "programming error.] (at /paddle/Paddle/paddle/fluid/distributed/collective/"
        "ProcessGroupNCCL.cc:105)\n",
        "duplicate-gpu", "low", None),

    # ---- ascend-hccl ----
    # npu-smi (DCMI): the NPU held by another non-privileged container
    "npu-smi-device-used": (
        "dcmi model initialized failed, because the device is used. ret is -8020\n"
        "npu get board type failed. ret is -9005\n",
        "ascend-hccl", "medium", None),
    # the CANN runtime's device count from the driver (drvErr=87)
    "cann-drvgetdevnum": (
        "[ERROR] RUNTIME(1234,python):2025-01-01-00:00:00.000.000 [npu_driver.cc:98]1234 "
        "GetDeviceCount:Call drvGetDevNum, drvRetCode=87.\n",
        "ascend-hccl", "medium", None),

    # ---- exit-time-abort ----
    # libstdc++ std::thread::join on itself while the process tears down
    "exit-resource-deadlock": (
        "Training finished. Saving final checkpoint.\n"
        "terminate called after throwing an instance of 'std::system_error'\n"
        "  what():  Resource deadlock avoided\n",
        "exit-time-abort", "low", None),
    # CPython threading._shutdown failing at exit
    "exit-threading-module": (
        "Exception ignored in: <module 'threading' from '/usr/lib/python3.10/threading.py'>\n"
        "Traceback (most recent call last):\n"
        "  File \"/usr/lib/python3.10/threading.py\", line 1567, in _shutdown\n",
        "exit-time-abort", "low", None),
}

# (log text, the rule expected instead, or None for no known cause)
TORCHVISION_IMAGE = (
    "/opt/conda/lib/python3.10/site-packages/torchvision/io/image.py:13: UserWarning: Failed to "
    "load image Python extension: '/opt/conda/lib/python3.10/site-packages/torchvision/image.so: "
    "undefined symbol: _ZN3c1017RegisterOperatorsD1Ev'If you don't plan on using image "
    "functionality from `torchvision.io`, you can ignore this warning. Otherwise, there might be "
    "something wrong with your environment. Did you have `libjpeg` or `libpng` installed before "
    "building `torchvision` from source?\n  warn(\n")

NEGATIVE = {
    # torchvision's import-time warning (torchvision/io/image.py) is harmless: it names no cause
    # of its own, and the real one later in the log wins (it was a strong library mismatch)
    "torchvision-image-extension-alone": (TORCHVISION_IMAGE + "epoch 0 step 10 loss 2.31\n", None),
    "torchvision-image-extension-then-oom": (
        TORCHVISION_IMAGE + "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.02 GiB is free.\n",
        "cuda-out-of-memory"),
    # fcntl locks on NFS (EDEADLK) are not a thread joining itself at exit
    "nfs-lock-deadlock": (
        "OSError: [Errno 35] Resource deadlock avoided\n",
        None),
    # the same TensorFlow warning on a host with no NVIDIA driver: no GPU is not a library mismatch
    "tf-no-driver": (
        "2023-01-01 00:00:00.000000: W tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:265] "
        "failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n",
        "cuda-unavailable"),
    # a jaxlib CUDA probe that failed on CUDA_ERROR_NOT_INITIALIZED is not named a library mismatch
    "jax-versions-helpers-not-initialized": (
        "CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:90: operation "
        "gpuDeviceGetAttribute( &major, GPU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) "
        "failed: CUDA_ERROR_NOT_INITIALIZED (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)\n",
        None),
    # a gloo backend dtype message stays the backend rule, not the HCCL rule
    "nccl-input-dtype": (
        "TypeError: Input tensor data type is not supported for NCCL process group: Float8_e4m3fn\n",
        "backend-device-unsupported"),
    # an invalid device ordinal from set_device stays the ordinal rule
    "invalid-ordinal": (
        "RuntimeError: CUDA error: invalid device ordinal\n",
        "cuda-invalid-device-ordinal"),
    # the NCCL duplicate-GPU text keeps its own (strong) rule
    "nccl-duplicate": (
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000\n",
        "duplicate-gpu"),
    # Cambricon's cnrtSetDevice with an ordinal out of range is not Ascend's rtSetDevice
    "cambricon-device-invalid": (
        "RuntimeError: cnrtSetDevice failed: cnrtErrorDeviceInvalid\n",
        "cuda-invalid-device-ordinal"),
    # DeepSpeed's accepted minor-version difference is a healthy build's line
    "deepspeed-cuda-minor-accepted": (
        "Installed CUDA version 11.8 does not match the version torch was compiled with 11.7 but since "
        "the APIs are compatible, accepting this combination\n",
        None),
    # cudaErrorInvalidDevicePointer (a bad pointer) is not an invalid device ordinal
    "cupy-invalid-device-pointer": (
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInvalidDevicePointer: invalid "
        "device pointer\n",
        None),
    # NVML without a loaded driver is no driver (not another release of it)
    "nvidia-driver-not-loaded-nvml": (
        "Failed to initialize NVML: Driver Not Loaded\n",
        "cuda-unavailable"),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEGATIVE)
