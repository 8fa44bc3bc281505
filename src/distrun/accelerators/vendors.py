"""The one table of vendor facts. Every per-vendor decision in distrun reads this table.

Sources (checked against each vendor's documentation):
- NVIDIA: CUDA_VISIBLE_DEVICES, NCCL, NVML (nvidia-ml-py) / nvidia-smi.
- AMD ROCm: the ROCm build of torch exposes devices as ``cuda``; HIP_VISIBLE_DEVICES
  (ROCR_VISIBLE_DEVICES at the runtime level); RCCL answers to the ``nccl`` backend name;
  amdsmi / amd-smi / rocm-smi.
- Intel GPU: ``xpu`` device built into torch >= 2.4, ZE_AFFINITY_MASK; ``xccl`` backend in
  torch >= 2.7 (``ccl`` from oneccl_bindings_for_pytorch before that); xpu-smi.
- Huawei Ascend: torch_npu, ASCEND_RT_VISIBLE_DEVICES, ``hccl``, npu-smi.
- Enflame GCU: torch_gcu (import it before torch.distributed), TOPS_VISIBLE_DEVICES,
  ``eccl``, efsmi.
- Cambricon: torch_mlu, MLU_VISIBLE_DEVICES, ``cncl``, cnmon.
- Apple: ``mps``, one device, no collective backend of its own (gloo).
- CPU: gloo, psutil.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class VendorId(str, Enum):
    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
    ASCEND = "ascend"
    ENFLAME = "enflame"
    CAMBRICON = "cambricon"
    APPLE = "apple"
    CPU = "cpu"


@dataclass(frozen=True)
class Vendor:
    """Facts about one accelerator vendor. ``backends`` is in order of preference."""

    id: VendorId
    label: str
    torch_device: str
    module: str | None
    visibility_vars: tuple[str, ...]
    backends: tuple[str, ...]
    tools: tuple[str, ...]
    model_words: tuple[str, ...]

    @property
    def backend(self) -> str:
        return self.backends[0]

    @property
    def visibility_var(self) -> str | None:
        return self.visibility_vars[0] if self.visibility_vars else None


VENDORS: dict[VendorId, Vendor] = {
    v.id: v
    for v in (
        Vendor(VendorId.NVIDIA, "NVIDIA", "cuda", None, ("CUDA_VISIBLE_DEVICES",), ("nccl",),
               ("nvml", "nvidia-smi"),
               ("h100", "h200", "h800", "h20", "a100", "a800", "a10", "a30", "a40", "l4", "l40",
                "v100", "t4", "p100", "rtx", "gb200", "b200", "b100", "gh200", "nvidia", "cuda")),
        Vendor(VendorId.AMD, "AMD ROCm", "cuda", None,
               ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"), ("nccl",),
               ("amdsmi", "amd-smi", "rocm-smi"), ("mi300", "mi325", "mi250", "mi210", "mi100",
                                                  "mi355", "instinct", "radeon", "amd", "rocm")),
        Vendor(VendorId.INTEL, "Intel GPU", "xpu", None, ("ZE_AFFINITY_MASK",), ("xccl", "ccl"),
               ("xpu-smi",), ("pvc", "max", "arc", "flex", "gaudi-xpu", "xpu", "intel")),
        Vendor(VendorId.ASCEND, "Huawei Ascend", "npu", "torch_npu",
               ("ASCEND_RT_VISIBLE_DEVICES",), ("hccl",), ("npu-smi",),
               ("910", "910b", "910c", "310p", "ascend", "npu")),
        Vendor(VendorId.ENFLAME, "Enflame GCU", "gcu", "torch_gcu", ("TOPS_VISIBLE_DEVICES",),
               ("eccl",), ("efsmi",), ("t20", "t21", "s60", "i20", "gcu", "enflame")),
        Vendor(VendorId.CAMBRICON, "Cambricon MLU", "mlu", "torch_mlu", ("MLU_VISIBLE_DEVICES",),
               ("cncl",), ("cnmon",), ("mlu370", "mlu590", "mlu", "cambricon")),
        Vendor(VendorId.APPLE, "Apple", "mps", None, (), ("gloo",), (), ("mps", "m1", "m2", "m3",
                                                                        "m4", "apple")),
        Vendor(VendorId.CPU, "CPU", "cpu", None, (), ("gloo",), ("psutil",), ("cpu",)),
    )
}

# Probe order: vendors with their own tool first; CPU last (always present).
PROBE_ORDER: tuple[VendorId, ...] = (
    VendorId.NVIDIA,
    VendorId.AMD,
    VendorId.INTEL,
    VendorId.ASCEND,
    VendorId.ENFLAME,
    VendorId.CAMBRICON,
    VendorId.APPLE,
)

ALL_BACKENDS: frozenset[str] = frozenset(b for v in VENDORS.values() for b in v.backends)
# Backends of no vendor of their own: usable with any device (gloo on CPU, MPI, UCC).
GENERIC_BACKENDS: tuple[str, ...] = ("gloo", "mpi", "ucc")
# Every backend name distrun knows, generic first, then in vendor-table order.
KNOWN_BACKENDS: tuple[str, ...] = tuple(dict.fromkeys(
    (*GENERIC_BACKENDS, *(b for v in VENDORS.values() for b in v.backends))))


def vendor_for_model(model: str) -> Vendor | None:
    """The vendor whose model words match ``model`` (``H100-80GB`` -> NVIDIA), or None."""
    words = model.lower().replace("_", "-").split("-")
    for vendor in VENDORS.values():
        for word in words:
            if any(word == w or word.startswith(w) for w in vendor.model_words if len(w) > 2):
                return vendor
            if word in vendor.model_words:
                return vendor
    return None


def vendors_for_backend(backend: str) -> tuple[Vendor, ...]:
    return tuple(v for v in VENDORS.values() if backend in v.backends)
