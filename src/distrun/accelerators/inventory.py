"""Inventories: the devices of one node, detected here or declared for machines elsewhere."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from distrun.accelerators.vendors import VENDORS, Vendor, VendorId, vendor_for_model
from distrun.errors import UsageError
from distrun.model.userfile import shown


@dataclass(frozen=True)
class Device:
    """One accelerator. ``index`` is the physical ordinal the vendor tool reports."""

    vendor: VendorId
    index: int
    name: str
    memory_bytes: int | None = None
    uuid: str | None = None
    bus_id: str | None = None


@dataclass(frozen=True)
class NodeInventory:
    """What one node has. ``devices`` are the devices this process may use (visibility applied)."""

    vendor: VendorId
    devices: tuple[Device, ...]
    host: str = "localhost"
    cpus: int | None = None
    memory_bytes: int | None = None
    declared: bool = False
    physical_count: int | None = None
    visibility: str | None = None
    invalid_visible: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def info(self) -> Vendor:
        return VENDORS[self.vendor]

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def is_accelerated(self) -> bool:
        return self.vendor is not VendorId.CPU


_DECLARED = re.compile(r"^(?:(\d{1,12})x)?(\d{1,12})x([A-Za-z][\w.\-]{0,63})$")
_MEMORY = re.compile(r"(\d{1,6})\s*(g|gb|gib)$", re.IGNORECASE)
# Bounds of a declared inventory: the largest jobs run on some 10^5 devices; a typo such as
# 99999999x8xH100 must be one line, not gigabytes of plan.
NODES_MAX = 100_000
DEVICES_PER_NODE_MAX = 1024
DEVICES_MAX = 2**20


def parse_declared(text: str) -> tuple[NodeInventory, ...]:
    """``2x8xH100-80GB`` -> 2 nodes of 8 H100 with 80 GiB each; ``8xgcu`` is one node of 8."""
    m = _DECLARED.match(text.strip())
    if not m:
        raise UsageError(
            f"--inventory {shown(text)} is not NODESxDEVICESxMODEL",
            "e.g. 2x8xH100-80GB, 1x8xgcu or 1x4xcpu",
            "write the inventory as NODESxDEVICESxMODEL",
        )
    nnodes, ndev, model = int(m.group(1) or 1), int(m.group(2)), m.group(3)
    vendor = vendor_for_model(model)
    if vendor is None:
        known = ", ".join(sorted({w for v in VENDORS.values() for w in v.model_words[:2]}))
        raise UsageError(
            f"--inventory {shown(text)}: model {model!r} names no known vendor",
            f"a model or vendor word such as {known}",
            "use a model name like H100-80GB, MI300X, 910B, T20, MLU370, or 'cpu'",
        )
    check_sizes(text, nnodes, ndev)
    mem = _MEMORY.search(model)
    memory = int(mem.group(1)) * 2**30 if mem else None
    devices = tuple(Device(vendor.id, i, model, memory) for i in range(ndev))
    return tuple(
        NodeInventory(vendor.id, devices, host=f"node{k}", declared=True, physical_count=ndev)
        for k in range(nnodes)
    )


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


def apply_visibility(
    vendor: VendorId, devices: Sequence[Device], env: Mapping[str, str]
) -> tuple[tuple[Device, ...], str | None, tuple[str, ...]]:
    """Devices this process may see under the vendor's visibility variable, in its order.

    Entries are ordinals or UUIDs (or UUID prefixes, as CUDA accepts). Returns the visible
    devices, the variable's value (None when unset) and the entries matching no device.
    """
    for var in VENDORS[vendor].visibility_vars:
        value = env.get(var)
        if value is not None:
            break
    else:
        return tuple(devices), None, ()
    visible: list[Device] = []
    invalid: list[str] = []
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        match = _find(devices, entry)
        if match is None:
            invalid.append(entry)
        elif match not in visible:
            visible.append(match)
    return tuple(visible), value, tuple(invalid)


def _find(devices: Sequence[Device], entry: str) -> Device | None:
    if entry.lstrip("-").isdigit():
        return next((d for d in devices if d.index == int(entry)), None)
    return next((d for d in devices if d.uuid and d.uuid.startswith(entry)), None)


def with_host(node: NodeInventory, host: str) -> NodeInventory:
    return replace(node, host=host)
