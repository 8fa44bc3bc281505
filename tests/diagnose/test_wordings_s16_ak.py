"""Wordings added in session 16 by helper ak (issue 12): CUDA libraries a wheel bundles under a
hashed name and TensorRT's libraries, from development cases and the printing sources.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

MISMATCH = "nccl-cuda-library-mismatch"

CASES: dict[str, Case] = {
    # torchvision.libs' copy of the CUDA runtime, deleted under a running conda environment
    "torchvision.libs libcudart deleted": (
        NOISE + "RuntimeError: /opt/conda/lib/python3.11/site-packages/torchvision.libs/"
        "libcudart.7ec1eba6.so.12 (deleted): cannot open shared object file: No such file or "
        "directory\n", MISMATCH, "high", None),
    # auditwheel's hashed name (a repaired manylinux wheel that bundles the CUDA runtime)
    "auditwheel libcudart": (
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
        "    import torchaudio\nOSError: libcudart-9335f6a2.so.12: cannot open shared object file: "
        "No such file or directory\n", MISMATCH, "high", None),
    # onnxruntime provider_bridge_ort.cc: the TensorRT EP without TensorRT's libraries
    "onnxruntime tensorrt ep libnvinfer": (
        "EP Error /onnxruntime_src/onnxruntime/core/session/provider_bridge_ort.cc:1193 "
        "onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError] : 1 : FAIL : "
        "Failed to load library libonnxruntime_providers_tensorrt.so with error: libnvinfer.so.8: "
        "cannot open shared object file: No such file or directory\n", MISMATCH, "high", None),
    # tensorrt's python bindings of another TensorRT release than the one installed
    "tensorrt bindings libnvinfer_plugin": (
        NOISE + "    from .tensorrt import *\nImportError: libnvinfer_plugin.so.10: cannot open "
        "shared object file: No such file or directory\n", MISMATCH, "high", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # TensorFlow probing TensorRT at import (dso_loader.cc, a benign line): the job goes on
    "tf-trt probe at import": (
        "2024-06-04 15:42:11.291621: I external/local_tsl/tsl/platform/default/dso_loader.cc:70] "
        "Could not load dynamic library 'libnvinfer.so.8.6.1'; dlerror: libnvinfer.so.8.6.1: cannot "
        "open shared object file: No such file or directory; LD_LIBRARY_PATH: :/usr/lib\n"
        + NOISE, None),
    # a container started without GPU access: the driver's libcuda is not there (no driver, not a
    # mismatch of the CUDA libraries)
    "docker image without --gpus": (
        "/sd-cli: error while loading shared libraries: libcuda.so.1: cannot open shared object "
        "file: No such file or directory\n", "cuda-unavailable"),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
