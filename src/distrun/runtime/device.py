"""Bind a rank to its device with the vendor's own API; never a CUDA call on other hardware.

One row per torch device type: the extension module to import first (it registers the
device with torch) and the ``torch.<type>`` namespace whose ``set_device`` /
``device_count`` are called.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import ModuleType

from distrun.accelerators.vendors import VENDORS

# device type -> extension module that must be imported before use (None: built into torch)
EXTENSIONS: dict[str, str | None] = {v.torch_device: v.module for v in VENDORS.values()}
ACCELERATORS = ("npu", "gcu", "mlu", "xpu", "cuda")


def namespace(device_type: str) -> ModuleType | None:
    """``torch.cuda`` / ``torch.xpu`` / ``torch.npu`` ...; None for cpu and mps."""
    if device_type in ("cpu", "mps"):
        return None
    module = EXTENSIONS.get(device_type)
    if module:
        importlib.import_module(module)
    import torch

    return getattr(torch, device_type, None)


def device_count(device_type: str) -> int:
    ns = namespace(device_type)
    if ns is None:
        return 1
    return int(ns.device_count())


def bind(device_type: str, local_rank: int) -> str:
    """Make ``device_type:local_rank`` this process's current device; its torch name."""
    ns = namespace(device_type)
    if ns is None:
        return device_type
    ns.set_device(local_rank)
    return f"{device_type}:{local_rank}"


def detect_type(env: Mapping[str, str]) -> str:
    """The device type of this process: the launcher's word, else what is installed here.

    Order: the launcher's DISTRUN_DEVICE_TYPE; vendor extension modules (torch_npu,
    torch_gcu, torch_mlu); Intel XPU; NVIDIA through NVML (no CUDA call); a ROCm build of
    torch; Apple MPS; else CPU.
    """
    if env.get("DISTRUN_DEVICE_TYPE"):
        return env["DISTRUN_DEVICE_TYPE"]
    for device_type in ("npu", "gcu", "mlu"):
        module = EXTENSIONS[device_type]
        if module and importlib.util.find_spec(module) is not None:
            return device_type
    import torch

    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if _nvml_count() > 0 or getattr(torch.version, "hip", None):
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _nvml_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: no NVIDIA device
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()
