"""Inventories: the devices of one node, detected here or declared for machines elsewhere."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from distrun.accelerators.vendors import (
    VENDORS,
    Vendor,
    VendorId,
    declared_shape,
)


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


_MEMORY = re.compile(r"(\d{1,6})\s*(g|gb|gib)$", re.IGNORECASE)


def parse_declared(text: str) -> tuple[NodeInventory, ...]:
    """``2x8xH100-80GB`` -> 2 nodes of 8 H100 with 80 GiB each; ``8xgcu`` is one node of 8."""
    shape = declared_shape(text)
    mem = _MEMORY.search(shape.model)
    memory = int(mem.group(1)) * 2**30 if mem else None
    devices = tuple(Device(shape.vendor.id, i, shape.model, memory)
                    for i in range(shape.devices))
    return tuple(
        NodeInventory(shape.vendor.id, devices, host=f"node{k}", declared=True,
                      physical_count=shape.devices)
        for k in range(shape.nodes)
    )


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
