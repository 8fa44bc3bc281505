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

import re
from dataclasses import dataclass
from enum import Enum

from distrun.errors import UsageError
from distrun.model.limits import DEVICES_MAX, DEVICES_PER_NODE_MAX, NODES_MAX
from distrun.model.userfile import shown


class VendorId(str, Enum):
    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
    ASCEND = "ascend"
    ENFLAME = "enflame"
    CAMBRICON = "cambricon"
    APPLE = "apple"
    CPU = "cpu"


class SamplerKind(str, Enum):
    """How the monitor reads a vendor's devices while a job runs (``monitor.devices``)."""

    NVML = "nvml"  # nvidia-ml-py, nvidia-smi when it is not importable
    AMDSMI = "amdsmi"  # the amdsmi library of ROCm
    XPU_SMI = "xpu-smi"  # discovery once, then stats per device
    TABLE = "table"  # one run of the vendor's tool per tick, parsed by the probe's parser
    NONE = "none"  # no per-device reading: per-process CPU use stands in


@dataclass(frozen=True)
class Deploy:
    """How other schedulers name this vendor's devices (the exporters read these).

    ``k8s_resource``: the device plugin's resource name; ``slurm_gres``: Slurm allocates these
    as GPUs (``--gpus-per-node``) and its gres plugin then sets the visibility variable;
    ``accelerate_type``: accelerate's DistributedType for more than one process.
    """

    k8s_resource: str | None = None
    slurm_gres: bool = False
    accelerate_type: str | None = None
    slurm_sets_visibility: bool = False


@dataclass(frozen=True)
class Vendor:
    """Facts about one accelerator vendor. ``backends`` is in order of preference.

    ``shares_device``: every rank uses the same device (CPU, Apple MPS), so there is no
    per-rank device to bind or to verify. ``driver_file``: where the kernel driver states its
    version (compared across nodes). ``sampler``: how the monitor reads the devices.
    """

    id: VendorId
    label: str
    torch_device: str
    module: str | None
    visibility_vars: tuple[str, ...]
    backends: tuple[str, ...]
    tools: tuple[str, ...]
    model_words: tuple[str, ...]
    sampler: SamplerKind = SamplerKind.NONE
    deploy: Deploy = Deploy()
    shares_device: bool = False
    driver_file: str | None = None

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
                "v100", "t4", "p100", "rtx", "gb200", "b200", "b100", "gh200", "nvidia", "cuda"),
               SamplerKind.NVML, Deploy("nvidia.com/gpu", True, "MULTI_GPU", True),
               driver_file="/proc/driver/nvidia/version"),
        Vendor(VendorId.AMD, "AMD ROCm", "cuda", None,
               ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"), ("nccl",),
               ("amdsmi", "amd-smi", "rocm-smi"), ("mi300", "mi325", "mi250", "mi210", "mi100",
                                                  "mi355", "instinct", "radeon", "amd", "rocm"),
               SamplerKind.AMDSMI, Deploy("amd.com/gpu", True, "MULTI_GPU", True),
               driver_file="/sys/module/amdgpu/version"),
        Vendor(VendorId.INTEL, "Intel GPU", "xpu", None, ("ZE_AFFINITY_MASK",), ("xccl", "ccl"),
               ("xpu-smi",), ("pvc", "max", "arc", "flex", "gaudi-xpu", "xpu", "intel"),
               SamplerKind.XPU_SMI, Deploy("gpu.intel.com/i915", True, "MULTI_XPU", True)),
        Vendor(VendorId.ASCEND, "Huawei Ascend", "npu", "torch_npu",
               ("ASCEND_RT_VISIBLE_DEVICES",), ("hccl",), ("npu-smi",),
               ("910", "910b", "910c", "310p", "ascend", "npu"),
               SamplerKind.TABLE, Deploy("huawei.com/Ascend910", True, "MULTI_NPU")),
        Vendor(VendorId.ENFLAME, "Enflame GCU", "gcu", "torch_gcu", ("TOPS_VISIBLE_DEVICES",),
               ("eccl",), ("efsmi",), ("t20", "t21", "s60", "i20", "gcu", "enflame"),
               SamplerKind.TABLE, Deploy(None, True, None)),
        Vendor(VendorId.CAMBRICON, "Cambricon MLU", "mlu", "torch_mlu", ("MLU_VISIBLE_DEVICES",),
               ("cncl",), ("cnmon",), ("mlu370", "mlu590", "mlu", "cambricon"),
               SamplerKind.TABLE, Deploy(None, True, "MULTI_MLU")),
        Vendor(VendorId.APPLE, "Apple", "mps", None, (), ("gloo",), (), ("mps", "m1", "m2", "m3",
                                                                        "m4", "apple"),
               deploy=Deploy(None, False, None), shares_device=True),
        Vendor(VendorId.CPU, "CPU", "cpu", None, (), ("gloo",), ("psutil",), ("cpu",),
               deploy=Deploy(None, False, "MULTI_CPU"), shares_device=True),
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

# The runtime's order when nothing is declared: a vendor whose torch extension is installed
# (found, not imported) wins over what torch itself can see (``runtime.device.detect_type``).
EXTENSION_ORDER: tuple[VendorId, ...] = tuple(v for v in PROBE_ORDER if VENDORS[v].module)

BY_DEVICE_TYPE: dict[str, Vendor] = {}
for _vendor in VENDORS.values():  # first wins: "cuda" is NVIDIA's (AMD's ROCm build shares it)
    BY_DEVICE_TYPE.setdefault(_vendor.torch_device, _vendor)
# Device types on which all ranks share one device (nothing to bind, nothing to verify).
SHARED_DEVICE_TYPES: frozenset[str] = frozenset(
    v.torch_device for v in VENDORS.values() if v.shares_device)

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


def vendor_named(name: str) -> Vendor | None:
    """The row for a vendor id (``"nvidia"``), or None for a name distrun does not know."""
    try:
        return VENDORS[VendorId(name)]
    except ValueError:
        return None


_DECLARED = re.compile(r"^(?:(\d{1,12})x)?(\d{1,12})x([A-Za-z][\w.\-]{0,63})$")


@dataclass(frozen=True)
class DeclaredShape:
    """``NODESxDEVICESxMODEL`` (``--inventory``, ``DISTRUN_INVENTORY``), checked."""

    nodes: int
    devices: int
    vendor: Vendor
    model: str


def declared_shape(text: str) -> DeclaredShape:
    """``2x8xH100-80GB`` -> 2 nodes of 8 NVIDIA devices; a UsageError naming the fix else."""
    m = _DECLARED.match(text.strip())
    if not m:
        raise UsageError(f"--inventory {shown(text)} is not NODESxDEVICESxMODEL",
                         "e.g. 2x8xH100-80GB, 1x8xgcu or 1x4xcpu",
                         "write the inventory as NODESxDEVICESxMODEL")
    nnodes, ndev, model = int(m.group(1) or 1), int(m.group(2)), m.group(3)
    vendor = vendor_for_model(model)
    if vendor is None:
        known = ", ".join(sorted({w for v in VENDORS.values() for w in v.model_words[:2]}))
        raise UsageError(f"--inventory {shown(text)}: model {model!r} names no known vendor",
                         f"a model or vendor word such as {known}",
                         "use a model name like H100-80GB, MI300X, 910B, T20, MLU370, or 'cpu'")
    check_sizes(text, nnodes, ndev)
    return DeclaredShape(nnodes, ndev, vendor, model)


def check_sizes(text: str, nnodes: int, ndev: int) -> None:
    """Refuse zero and absurd sizes of a declared inventory in one line."""
    if nnodes < 1 or ndev < 1:
        raise UsageError(f"--inventory {shown(text)} has zero nodes or devices", "at least 1x1",
                         "use e.g. 1x8xH100")
    if nnodes > NODES_MAX or ndev > DEVICES_PER_NODE_MAX or nnodes * ndev > DEVICES_MAX:
        raise UsageError(
            f"--inventory {shown(text)} declares {nnodes} node(s) of {ndev} device(s)",
            f"at most {NODES_MAX} nodes, {DEVICES_PER_NODE_MAX} devices per node and "
            f"{DEVICES_MAX} devices in all",
            "check the numbers: NODESxDEVICESxMODEL, e.g. 2x8xH100")
