"""Bind a rank to its device with the vendor's own API; never a CUDA call on other hardware.

One row per torch device type: the extension module to import first (it registers the
device with torch: ``torch.utils.rename_privateuse1_backend("npu")`` and
``torch._register_device_module("npu", torch_npu.npu)``, and the same for ``gcu`` and
``mlu``) and the ``torch.<type>`` namespace whose ``device_count`` / ``set_device`` are
called. ``cuda`` (NVIDIA, and AMD through ROCm's HIP build) and ``xpu`` are built into torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from distrun.accelerators.sessions import NVML, session
from distrun.accelerators.vendors import (
    EXTENSION_ORDER,
    KNOWN_BACKENDS,
    SHARED_DEVICE_TYPES,
    VENDORS,
    declared_shape,
)
from distrun.errors import DistrunError
from distrun.runtime.errors import InitError

if TYPE_CHECKING:
    import torch

# device type -> extension module that must be imported before use (None: built into torch)
EXTENSIONS: dict[str, str | None] = {v.torch_device: v.module for v in VENDORS.values()}
# device type -> collective backends in order of preference (the vendor table's)
BACKENDS: dict[str, tuple[str, ...]] = {v.torch_device: v.backends for v in VENDORS.values()}
UNBOUND = SHARED_DEVICE_TYPES  # device types with no per-rank device to select
INVENTORY_VAR = "DISTRUN_INVENTORY"


def namespace(device_type: str) -> ModuleType | None:
    """``torch.cuda`` / ``torch.xpu`` / ``torch.npu`` ...; None for cpu and mps."""
    if device_type in UNBOUND:
        return None
    module = EXTENSIONS.get(device_type)
    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise InitError(f"device type {device_type!r} needs the module {module}, which "
                            f"does not import here ({err})",
                            f"{module} installed for this torch",
                            f"install {module} (the vendor's torch extension), or set "
                            "DISTRUN_DEVICE_TYPE=cpu") from None
    import torch

    ns = getattr(torch, device_type, None)
    if not isinstance(ns, ModuleType) or not hasattr(ns, "set_device"):
        raise InitError(f"torch has no torch.{device_type} device module",
                        f"a torch build (or extension) that provides torch.{device_type}",
                        "install the vendor's torch build, or set DISTRUN_DEVICE_TYPE=cpu")
    return ns


def declared_count(env: Mapping[str, str]) -> tuple[str, int] | None:
    """``DISTRUN_INVENTORY=1x8xgcu``: (device type, devices on this node), else None."""
    text = env.get(INVENTORY_VAR)
    if not text:
        return None
    try:
        shape = declared_shape(text)
    except DistrunError as err:
        raise InitError(f"{INVENTORY_VAR}={text!r}: {err.seen}", err.expected,
                        f"set {INVENTORY_VAR} to NODESxDEVICESxMODEL, e.g. 1x8xgcu, or unset "
                        "it") from None
    return shape.vendor.torch_device, shape.devices


def device_count(device_type: str, env: Mapping[str, str] | None = None) -> int:
    """Devices of this type this process sees: the declared inventory's, else the vendor's."""
    declared = declared_count(env or {})
    if declared is not None:
        return declared[1]
    ns = namespace(device_type)
    if ns is None:
        return 1
    return int(ns.device_count())


def bind(device_type: str, local_rank: int) -> torch.device:
    """Make ``device_type:local_rank`` this process's current device; that ``torch.device``.

    cpu and mps have no per-rank index: ``torch.device("cpu")``.
    """
    import torch

    ns = namespace(device_type)
    if ns is None:
        return torch.device(device_type)
    ns.set_device(local_rank)
    return torch.device(device_type, local_rank)


def detect_type(env: Mapping[str, str]) -> str:
    """The device type of this process: the launcher's word, else what is installed here.

    Order: the launcher's DISTRUN_DEVICE_TYPE; a declared DISTRUN_INVENTORY; vendor
    extension modules (torch_npu, torch_gcu, torch_mlu: found, not imported); Intel XPU;
    NVIDIA through NVML (no CUDA call) with a CUDA build of torch; a ROCm build of torch
    with devices; Apple MPS; else CPU. No CUDA function is called unless NVML found an
    NVIDIA device or torch is a ROCm build.
    """
    if env.get("DISTRUN_DEVICE_TYPE"):
        return env["DISTRUN_DEVICE_TYPE"]
    declared = declared_count(env)
    if declared is not None:
        return declared[0]
    for vendor in (VENDORS[v] for v in EXTENSION_ORDER):
        if vendor.module and importlib.util.find_spec(vendor.module) is not None:
            return vendor.torch_device
    return _torch_type()


def _torch_type() -> str:
    import torch

    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    nvidia = _nvml_count()
    if nvidia > 0 and torch.version.cuda:
        return "cuda"
    if getattr(torch.version, "hip", None) and torch.cuda.device_count() > 0:
        return "cuda"
    if nvidia > 0:
        warnings.warn(f"{nvidia} NVIDIA GPU(s) here but torch {torch.__version__} has no CUDA: "
                      "running on CPU; install a CUDA build of torch to use them", stacklevel=4)
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _nvml_count() -> int:
    """NVIDIA devices through NVML (no CUDA context); 0 with no library or driver."""
    with session(NVML) as nvml:
        if nvml.lib is None:
            return 0
        try:
            return int(nvml.lib.nvmlDeviceGetCount())
        except nvml.errors:
            return 0


def choose_backend(device_type: str, requested: str | None) -> str:
    """The requested backend (checked), else the vendor's first one this build has."""
    import torch.distributed as dist

    if requested:
        if not dist.is_backend_available(requested):
            raise InitError(
                f"backend {requested!r} is not available in this torch build "
                f"(torch {_torch_version()}, device type {device_type})",
                f"a backend this build has: {', '.join(available_backends()) or 'none'}",
                f"pass backend={first_available(device_type)!r} (or unset DISTRUN_BACKEND), or install "
                f"the torch build / extension that provides {requested!r}")
        return requested
    for candidate in BACKENDS.get(device_type, ("gloo",)):
        if dist.is_backend_available(candidate):
            return candidate
    wanted = " or ".join(BACKENDS.get(device_type, ("gloo",)))
    raise InitError(f"device type {device_type!r} needs backend {wanted}, which this torch "
                    f"build lacks (it has: {', '.join(available_backends()) or 'none'})",
                    f"{wanted} available", "install the vendor's torch build or extension, "
                    "or pass backend='gloo' to run collectives on the CPU")


def first_available(device_type: str) -> str:
    """The vendor's first backend this build has, else gloo."""
    import torch.distributed as dist

    return next((b for b in BACKENDS.get(device_type, ()) if dist.is_backend_available(b)),
                "gloo")


def available_backends() -> list[str]:
    import torch.distributed as dist

    return [b for b in KNOWN_BACKENDS if dist.is_backend_available(b)]


def _torch_version() -> str:
    import torch

    return str(torch.__version__)
