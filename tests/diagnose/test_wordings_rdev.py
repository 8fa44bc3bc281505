"""Wordings of the device, driver, library-mismatch and shared-memory rules (issue 12, rdev).

Each log is short and built around the real message; the comment names where the
message comes from. Assertions are what the user sees: the rule, how sure, the rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _verdict

# (log text, rule id, confidence, rank or None)
CASES = {
    # oneDNN verbose error (bundled in libtorch_cpu.so, torch 2.x) on an XPU index too high
    "onednn-device-index": (
        "onednn_verbose,common,error,runtime,1 gpu devices are available but device index 2 "
        "was queried,src/gpu/intel/sycl/engine_factory.cpp:55\n"
        "RuntimeError: could not create an engine\n",
        "cuda-invalid-device-ordinal", "medium", None),
    # Ascend CANN acl_base.h ACL_ERROR_RT_INVALID_DEVICEID (107001), rank prefix from torchrun
    "acl-invalid-device-id": (
        "[rank3]: RuntimeError: call aclrtSetDeviceById failed, ACL_ERROR_RT_INVALID_DEVICEID\n",
        "ascend-hccl", "medium", 3),
    # the CUDA runtime's "invalid device ordinal" cut by a terminal wrap in a pasted issue
    "ordinal-cut-at-wrap": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 12, in <module>\n"
        "    torch.cuda.set_device(args.local_rank)\n"
        "RuntimeError: CUDA error: invalid device ord\n",
        "cuda-invalid-device-ordinal", "low", None),
    # rocminfo (ROCm 5/6) for a user or container without access to /dev/kfd
    "rocminfo-hsa-out-of-resources": (
        "ROCk module is loaded\n"
        "hsa api call failure at: /long_pathname_so_that_rpms_can_package_the_debug_info/src/"
        "rocminfo/rocminfo.cc:1306\n"
        "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the "
        "necessary resources. This error may also occur when the core runtime library needs to "
        "spawn threads or create internal OS-specific events.\n",
        "cuda-unavailable", "medium", None),
    # docker (moby daemon/oci devices) on a host without the amdgpu kernel driver
    "docker-no-kfd": (
        "docker: Error response from daemon: error gathering device information while adding "
        "custom device \"/dev/kfd\": no such file or directory.\n",
        "cuda-unavailable", "medium", None),
    # rocm_smi.py (ROCm <= 5.x) when the amdgpu module is not loaded
    "rocm-smi-no-amdgpu": (
        "ERROR:root:Driver not initialized (amdgpu not found in modules)\n",
        "cuda-unavailable", "medium", None),
    # c10 CUDAFunctions.cpp hipified (ROCm builds): cudaErrorInsufficientDriver, no driver
    "rocm-no-driver": (
        "RuntimeError: Found no ROCm driver on your system. Please check that you have an AMD GPU "
        "and installed a driver\n",
        "cuda-unavailable", "medium", None),
    # a job script probing the AMD GPUs in a container without the ROCm tools
    "rocm-smi-not-found": (
        "+ rocm-smi --showuse\n"
        "/var/spool/slurmd/job123/slurm_script: line 9: rocm-smi: command not found\n",
        "cuda-unavailable", "low", None),
    # jax/_src/xla_bridge.py (0.4.1x) with jax_plugins/cuda's version check in the message:
    # the CUDA libraries are older than the jaxlib build (not a missing GPU)
    "jax-backend-cudnn-older": (
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 3, in <module>\n"
        "    print(jax.devices())\n"
        "RuntimeError: Unable to initialize backend 'cuda': Found cuDNN version 8600, but JAX "
        "was built against version 8900, which is newer. The copy of cuDNN that is installed "
        "must be at least as new as the version against which JAX was built. (you may need to "
        "uninstall the failing plugin package, or set JAX_PLATFORMS=cpu to skip this backend.)\n",
        "nccl-cuda-library-mismatch", "high", None),
    # jax_plugins/cuda/__init__.py _check_cuda_versions (jax >= 0.4.3x)
    "jax-cuda-components": (
        "Traceback (most recent call last):\n"
        "  File \"jax_plugins/xla_cuda12/__init__.py\", line 324, in initialize\n"
        "RuntimeError: Unable to use CUDA because of the following issues with CUDA components:\n"
        "--------------------------------------------------\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NCCL src/dev_runtime.cc (2.28+): device-API application against an older libnccl
    "nccl-library-too-old": (
        "node1:2211:2211 [0] NCCL WARN NCCL library is too old. This application was compiled "
        "with NCCL version 2.28.3, but is running with NCCL 2.27.5\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NCCL src/misc/cudawrap.cc: libcuda (the driver) lacks entry points NCCL needs
    "nccl-pfn-missing": (
        "node1:51:51 [0] misc/cudawrap.cc:188 NCCL WARN CUDA some PFN functions not found in "
        "the library\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NCCL src/misc/cudawrap.cc: cuGetProcAddress could not give one entry point
    "nccl-retrieve-symbol": (
        "node1:51:51 [0] misc/cudawrap.cc:179 NCCL WARN Retrieve cuMemCreate version 10020 "
        "failed with 500 status 0\n",
        "nccl-cuda-library-mismatch", "low", None),
    # torch/utils/cpp_extension.py CUDA_MISMATCH_MESSAGE (torch 2.x joins "compile" "PyTorch")
    "cpp-extension-cuda-mismatch": (
        "RuntimeError: \nThe detected CUDA version (12.1) mismatches the version that was used "
        "to compilePyTorch (11.8). Please make sure to use the same CUDA versions.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # torch/cuda/__init__.py _check_capability (torch 2.8+): the wheel lacks this GPU's kernels
    "torch-no-kernels-for-gpu": (
        "UserWarning: Found GPU0 NVIDIA B200 which is of compute capability (CC) 10.0.\n"
        "Your installed torch==2.6.0 does not include kernels for this GPU. Reinstall the same "
        "version against a CUDA build that does\n",
        "nccl-cuda-library-mismatch", "high", None),
    # torch/backends/cudnn/__init__.py: cuDNN 9.11+ on a GPU below sm_75
    "cudnn-sm75": (
        "RuntimeError: cuDNN version 91100 is not compatible with devices with SM < 7.5. "
        "Please install a version of PyTorch with a compatible cuDNN version.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # c10 CUDAFunctions.cpp hipified: a ROCm driver older than the HIP runtime
    "rocm-driver-too-old": (
        "RuntimeError: The ROCm driver on your system is too old (found version 50000000). "
        "Please update your GPU driver\n",
        "nccl-cuda-library-mismatch", "high", None),
    # torch/distributed/distributed_c10d.py (2.6+) on a CPU-only build
    "device-id-no-accelerator": (
        "ValueError: device_id is an int, but no accelerator support is found from the current "
        "compilation. Please use a different compiled version that supports accelerators.\n",
        "cuda-unavailable", "medium", None),
    # c10 HPU hooks (libc10 strings, torch 2.x) without habana_frameworks loaded or present
    "hpu-no-backend": (
        "RuntimeError: Cannot initialize HPU without HPU backend\n",
        "cuda-unavailable", "medium", None),
    # libnvidia-container: docker run --gpus device=3 on a host with two GPUs
    "container-unknown-device": (
        "docker: Error response from daemon: failed to create task for container: OCI runtime "
        "create failed: runc create failed: unable to start container process: error during "
        "container init: error running hook #0: error running hook: exit status 1, stdout: , "
        "stderr: Auto-detected mode as 'legacy'\n"
        "nvidia-container-cli: device error: 3: unknown device: unknown.\n",
        "cuda-invalid-device-ordinal", "medium", None),
    # cuDNN 9 status: a wheel's cuDNN sub-libraries of two releases
    "cudnn-sublibrary-mismatch": (
        "RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH\n",
        "nccl-cuda-library-mismatch", "high", None),
    # cuBLAS status: a cuBLAS without code for this GPU's architecture
    "cublas-arch-mismatch": (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasCreate(handle)`\n",
        "nccl-cuda-library-mismatch", "high", None),
    # apex setup.py check_cuda_torch_binary_vs_bare_metal
    "apex-cuda-mismatch": (
        "RuntimeError: Cuda extensions are being compiled with a version of Cuda that does not "
        "match the version used to compile Pytorch binaries.  Pytorch binaries were compiled "
        "with Cuda 12.1.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # libnvidia-container with a CUDA 12.2 image on a CUDA 11 driver
    "container-cuda-requirement": (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.2, please "
        "update your driver to a newer version, or use an earlier cuda container: unknown.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NGC container entrypoint banner, the sentence wrapped as the banner prints it
    "ngc-driver-too-old": (
        "ERROR: This container was built for NVIDIA Driver Release 530.30 or later, but\n"
        "       version 470.82.01 was detected and compatibility mode is UNAVAILABLE.\n",
        "nccl-cuda-library-mismatch", "high", None),
    # NGC container entrypoint banner for a container started without --gpus
    "ngc-no-driver": (
        "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
        "   Use the NVIDIA Container Toolkit to start this container with GPU support; see\n"
        "   https://docs.nvidia.com/datacenter/cloud-native/ .\n",
        "cuda-unavailable", "low", None),
    # Open MPI opal/mca/btl/vader help-btl-vader.txt [sys-limit], Docker's 64 MB /dev/shm
    "ompi-vader-shm": (
        "--------------------------------------------------------------------------\n"
        "It appears as if there is not enough space for /dev/shm/vader_segment.node1.0 (the "
        "shared-memory backing file). It is likely that your MPI job will now either abort or "
        "experience performance degradation.\n",
        "shm-bus-error", "high", None),
    # NCCL include/shm.h (2.8-2.11) with its file:line before NCCL WARN
    "nccl-shm-h-warn": (
        "node1:1688:1700 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : "
        "No space left on device\n",
        "shm-bus-error", "high", None),
    # a crash inside NCCL's shm setup (pytorch/tutorials CI before --shm-size=2gb)
    "nccl-shm-open-crash": (
        "Fatal Python error: Segmentation fault\n"
        "#3  0x00007f2a1c2b5e10 in ncclShmOpen(char*, unsigned long, void**, void**, int, "
        "void**) () from /usr/lib/x86_64-linux-gnu/libnccl.so.2\n",
        "shm-bus-error", "high", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wording(tmp_path: Path, name: str) -> None:
    text, rule, confidence, rank = CASES[name]
    assert _verdict(tmp_path, text) == (rule, confidence, rank)


@pytest.mark.parametrize(("text", "rule"), [
    # no device at all stays cuda-unavailable even inside jax's backend wording
    ("RuntimeError: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU "
     "devices. (you may need to uninstall the failing plugin package)\n", "cuda-unavailable"),
    # jax's backend wording with no reason jax names stays a low cuda-unavailable hint
    ("RuntimeError: Unable to initialize backend 'cuda': INTERNAL: something\n",
     "cuda-unavailable"),
])
def test_backend_init_reason_decides(tmp_path: Path, text: str, rule: str) -> None:
    assert _verdict(tmp_path, text)[0] == rule


@pytest.mark.parametrize(("text", "not_rule"), [
    # a container started with the AMD devices, then out of device memory
    ("docker run --device=/dev/kfd --device=/dev/dri --group-add video rocm/pytorch\n"
     "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB\n",
     "cuda-unavailable"),
    # the NGC banner of a CPU-only run is a weak hint: a real cause later in the log wins
    ("WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
     "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
     "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: "
     "address already in use\n", "cuda-unavailable"),
    # tensors on two devices is not an index beyond the visible devices
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two "
     "devices, cuda:0 and cuda:1!\n", "cuda-invalid-device-ordinal"),
    # NCCL's IB transport refusing NICs of two link layers is a network problem, not a build
    ("node1:1:1 [0] NCCL WARN NET/IB : Attempted to connect incompatible devices: [0]mlx5_0:1/IB "
     "and [1]mlx5_1:1/RoCE. Try selecting NICs of only one link type\n",
     "nccl-cuda-library-mismatch"),
    # a socket failure's "unhandled system error" is not a full /dev/shm
    ("node1:1:1 [0] NCCL WARN NET/Socket : Connect to 10.0.0.2<43211> failed : Connection "
     "refused\nRuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, "
     "NCCL version 2.14.3\n", "shm-bus-error"),
    # torch's minor-version warning ("shouldn't be a problem") is not a mismatch verdict
    ("The detected CUDA version (12.2) has a minor version mismatch with the version that was "
     "used to compile PyTorch (12.1). Most likely this shouldn't be a problem.\n",
     "nccl-cuda-library-mismatch"),
])
def test_neighbour_not_taken(tmp_path: Path, text: str, not_rule: str) -> None:
    assert _verdict(tmp_path, text)[0] != not_rule


def test_pip_resolver_report_is_a_hint_not_the_cause(tmp_path: Path) -> None:
    """pip prints its resolver conflict at install time; alone it is a low-confidence library
    mismatch, and a crash printed after it is the cause."""
    pip = ("ERROR: pip's dependency resolver does not currently take into account all the "
           "packages that are installed. This behaviour is the source of the following "
           "dependency conflicts.\n"
           "torch 2.1.0 requires nvidia-nccl-cu12==2.18.1; platform_system == \"Linux\", but you "
           "have nvidia-nccl-cu12 2.19.3 which is incompatible.\n")
    assert _verdict(tmp_path, pip) == ("nccl-cuda-library-mismatch", "low", None)
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert _verdict(tmp_path, pip + oom)[0] == "cuda-out-of-memory"


def test_wrapped_prefix_names_rank(tmp_path: Path) -> None:
    # ROCm docker without /dev/kfd seen by torch (HIP hipGetErrorString(hipErrorNoDevice)),
    # as torchrun's [rankN]: prefix prints it
    text = ("[rank2]: Traceback (most recent call last):\n"
            "[rank2]:   File \"train.py\", line 8, in <module>\n"
            "[rank2]:     torch.cuda.set_device(local_rank)\n"
            "[rank2]: RuntimeError: HIP error: no ROCm-capable device is detected\n")
    assert _verdict(tmp_path, text) == ("cuda-unavailable", "medium", 2)
