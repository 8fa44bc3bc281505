"""Wordings added in session 15 by helper ah (issue 12): NCCL/RCCL libraries that cannot run here,
from development cases and the printing sources (NVIDIA/nccl src/enqueue.cc, src/include/checks.h).

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

NCCL_INIT = (
    "node1:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
    "node1:4242:4242 [0] NCCL INFO cudaDriverVersion 12040\n"
    "NCCL version 2.21.5+cuda12.4\n"
)

CASES: dict[str, Case] = {
    # NCCL enqueue.cc ncclInitKernelsForDevice: NCCL's kernels are not in the library for this GPU
    "nccl kernels missing for this gpu": (
        NCCL_INIT
        + "node1:4242:4250 [0] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'\n"
        + "node1:4242:4250 [0] NCCL INFO init.cc:1475 -> 1\n",
        "nccl-cuda-library-mismatch", "high", None),
    # checks.h of NCCL 2.19+ prints the error number too; nccl-tests' own CUDACHECK
    "nccl kernels missing, numbered": (
        NOISE + "node1:4242:4250 [1] enqueue.cc:58 NCCL WARN Cuda failure 500 'named symbol not found'\n",
        "nccl-cuda-library-mismatch", "high", None),
    "nccl-tests cuda failure": (
        "# Using devices\nnode1: Test CUDA failure common.cu:892 'named symbol not found'\n",
        "nccl-cuda-library-mismatch", "high", None),
    # the library itself cannot load: it needs a runtime symbol the loaded HIP/CUDA lacks
    "rccl built for another rocm": (
        "ImportError: /opt/rocm/lib/librccl.so: undefined symbol: hipExtLaunchMultiKernelMultiDevice\n",
        "nccl-cuda-library-mismatch", "high", None),
    "libnccl with an unresolved internal symbol": (
        NOISE + "OSError: /usr/lib/x86_64-linux-gnu/libnccl.so.2: undefined symbol: "
        "_Z39ncclNvmlDeviceGetCurrPcieLinkGenerationP13nvmlDevice_stPj\n",
        "nccl-cuda-library-mismatch", "high", None),
    "rccl versioned soname": (
        "ImportError: /opt/rccl/lib/librccl.so.1: undefined symbol: _Z16ncclParamGinTypev\n",
        "nccl-cuda-library-mismatch", "high", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # NCCL's net plugin look-up is printed by healthy runs; a plugin is not libnccl itself
    "net plugin not found": (
        NCCL_INIT
        + "node1:4242:4242 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : "
        "libnccl-net.so: cannot open shared object file: No such file or directory\n"
        + NOISE,
        None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
