"""Wordings added in session 17 by helper as: the short paste with no standard error line for
cuda-unavailable and nccl-cuda-library-mismatch (a dmesg block of the NVIDIA kernel module, an
I-level TensorFlow line, onnxruntime's W-level provider line).

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

UNAVAILABLE = "cuda-unavailable"
MISMATCH = "nccl-cuda-library-mismatch"

CASES: dict[str, Case] = {
    # kernel-open/nvidia/nv.c: every probe failed, the module drives no GPU (dmesg)
    "nvrm none initialized": (
        "[    8.299233] nvidia 0000:3c:00.0: probe with driver nvidia failed with error -1\n"
        "[    8.299260] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
        "[    8.299262] NVRM: None of the NVIDIA devices were initialized.\n",
        UNAVAILABLE, "medium", None),
    # the same module when another driver (nouveau, vfio-pci) owns every GPU
    "nvrm no devices probed": (
        "[    7.205812] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n"
        "[    7.206301] NVRM: No NVIDIA devices probed.\n", UNAVAILABLE, "medium", None),
    # older releases' spellings
    "nvrm older wordings": (
        "[  202.483134] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
        "[  202.483136] NVRM: None of the NVIDIA graphics adapters were initialized!\n",
        UNAVAILABLE, "medium", None),
    "nvrm no adapter probed": (
        "NVRM: No NVIDIA graphics adapter probed!\n", UNAVAILABLE, "medium", None),
    # the per-device line alone: other GPUs may still be driven, hence weak
    "nvrm probe not called alone": (
        NOISE + "[ 3641.845221] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n",
        UNAVAILABLE, "low", None),
    # tensorflow stream_executor/cuda/cuda_diagnostics.cc (I-level) after cuInit failed
    "tf kernel driver not running": (
        "2023-05-10 13:57:10.390534: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:156] "
        "kernel driver does not appear to be running on this host (node1): "
        "/proc/driver/nvidia/version does not exist\n", UNAVAILABLE, "low", None),
    "tf cuinit 303": (
        "2022-04-28 04:13:39.859998: W tensorflow/stream_executor/cuda/cuda_driver.cc:269] "
        "failed call to cuInit: UNKNOWN ERROR (303)\n", UNAVAILABLE, "low", None),
    # onnxruntime_pybind_state.cc before 1.19: the W-level line, the CUDA EP's libraries missing
    # or of another CUDA/cuDNN release
    "ort please reference": (
        "2023-07-31 14:22:06.483132863 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:640 "
        "CreateExecutionProviderInstance] Failed to create CUDAExecutionProvider. Please reference "
        "https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html#requirements "
        "to ensure all dependencies are met.\n", MISMATCH, "low", None),
    "ort tensorrt please reference": (
        "[W:onnxruntime:Default, onnxruntime_pybind_state.cc:515 CreateExecutionProviderInstance] "
        "Failed to create TensorrtExecutionProvider. Please reference https://onnxruntime.ai/docs/"
        "execution-providers/TensorRT-ExecutionProvider.html#requirements to ensure all "
        "dependencies are met.\n", MISMATCH, "low", None),
    "ort bare": (
        "2023-05-09 18:38:36.929865635 [W:onnxruntime:Default, onnxruntime_pybind_state.cc:541 "
        "CreateExecutionProviderInstance] Failed to create CUDAExecutionProvider\n",
        MISMATCH, "low", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # the module loading normally is no failure
    "nvrm module loaded": (
        "[   19.783084] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
        "Sat Aug 19 01:15:15 UTC 2023\n", None),
    # DeepSpeed's CPU fallback (accelerator/real_accelerator.py) is what a healthy CPU run prints
    # too (tests/diagnose/healthy/deepspeed-torchrun.log): no cause
    "deepspeed cpu fallback": (
        "[2025-02-05 11:40:33,001] [WARNING] [real_accelerator.py:162:get_accelerator] Setting "
        "accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.\n"
        "[2025-02-05 11:40:33,002] [INFO] [real_accelerator.py:203:get_accelerator] Setting "
        "ds_accelerator to cpu (auto detect)\n", None),
    # a weak line never overrides a strong cause later in the log
    "tf driver line then module missing": (
        "2023-05-10 13:57:10.390534: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:156] "
        "kernel driver does not appear to be running on this host (node1): "
        "/proc/driver/nvidia/version does not exist\nTraceback (most recent call last):\n"
        "  File \"train.py\", line 3, in <module>\n    import flash_attn\n"
        "ModuleNotFoundError: No module named 'flash_attn'\n", "python-module-missing"),
    "ort warning then oom": (
        "[W:onnxruntime:Default, onnxruntime_pybind_state.cc:541 CreateExecutionProviderInstance] "
        "Failed to create TensorrtExecutionProvider. Please reference https://onnxruntime.ai/docs/"
        "execution-providers/TensorRT-ExecutionProvider.html#requirements to ensure all "
        "dependencies are met.\n" + NOISE + "torch.cuda.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.77 GiB of which 1.02 GiB "
        "is free.\n", "cuda-out-of-memory"),
    # a job that merely logs onnxruntime's provider choice
    "ort providers list": (
        "['TensorrtExecutionProvider', 'CUDAExecutionProvider', 'CPUExecutionProvider']\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
