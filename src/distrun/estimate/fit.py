"""Whether the model states fit each device of an inventory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distrun.accelerators.inventory import NodeInventory
from distrun.estimate.states import ModelStates


@dataclass(frozen=True)
class DeviceFit:
    """One device: its memory (None when unknown), and whether the states fit (None: unknown)."""

    host: str
    index: int
    name: str
    memory_bytes: int | None
    fits: bool | None
    headroom_bytes: int | None


def fits(states: ModelStates, nodes: Sequence[NodeInventory]) -> tuple[DeviceFit, ...]:
    """One row per device; a device of unknown memory fits ``None`` (unknown), never True."""
    rows = []
    for node in nodes:
        for dev in node.devices:
            mem = dev.memory_bytes
            room = None if mem is None else mem - states.total
            rows.append(DeviceFit(node.host, dev.index, dev.name, mem,
                                  None if room is None else room >= 0, room))
    return tuple(rows)
