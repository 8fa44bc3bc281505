"""Detect this node's accelerators: every vendor probe, in the table's order."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from distrun.accelerators.inventory import NodeInventory, apply_visibility
from distrun.accelerators.probes import (
    Probe,
    ProbeResult,
    Runner,
    amd,
    apple,
    ascend,
    cambricon,
    cpu,
    enflame,
    intel,
    nvidia,
    run_tool,
)
from distrun.accelerators.vendors import PROBE_ORDER, VendorId

PROBES: dict[VendorId, Probe] = {
    VendorId.NVIDIA: nvidia.probe,
    VendorId.AMD: amd.probe,
    VendorId.INTEL: intel.probe,
    VendorId.ASCEND: ascend.probe,
    VendorId.ENFLAME: enflame.probe,
    VendorId.CAMBRICON: cambricon.probe,
    VendorId.APPLE: apple.probe,
    VendorId.CPU: cpu.probe,
}


@dataclass(frozen=True)
class Detection:
    """Every probe's result and the node inventory chosen from them."""

    results: tuple[ProbeResult, ...]
    node: NodeInventory


def detect(
    env: Mapping[str, str] | None = None,
    run: Runner = run_tool,
    probes: Mapping[VendorId, Probe] = PROBES,
) -> Detection:
    """Probe every vendor; the first vendor found (table order) makes the inventory.

    A host with no accelerator gets a CPU inventory. Nothing here creates a device context.
    """
    env = os.environ if env is None else env
    results = tuple(probes[v](env, run) for v in (*PROBE_ORDER, VendorId.CPU) if v in probes)
    chosen = next((r for r in results if r.status == "found"), None)
    if chosen is None or chosen.vendor is VendorId.CPU:
        return Detection(results, _cpu_node())
    visible, value, invalid = apply_visibility(chosen.vendor, chosen.devices, env)
    node = NodeInventory(
        chosen.vendor,
        visible,
        host=socket.gethostname(),
        cpus=psutil.cpu_count(logical=True),
        memory_bytes=psutil.virtual_memory().total,
        physical_count=len(chosen.devices),
        visibility=value,
        invalid_visible=invalid,
    )
    return Detection(results, node)


def _cpu_node() -> NodeInventory:
    memory = psutil.virtual_memory().total
    device = cpu.probe({}, run_tool).devices
    return NodeInventory(
        VendorId.CPU,
        device,
        host=socket.gethostname(),
        cpus=psutil.cpu_count(logical=True),
        memory_bytes=memory,
        physical_count=1,
    )
