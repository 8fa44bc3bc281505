"""Verification after start, as pure functions over what the run directory and the samplers
saw: every expected rank joined, one device per rank, every device busy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distrun.accelerators.vendors import SHARED_DEVICE_TYPES
from distrun.model.findings import Finding, Severity
from distrun.monitor.samples import DeviceReading, DeviceSample, ProcSample
from distrun.monitor.state import RankState

SHARED_DEVICES = SHARED_DEVICE_TYPES  # the vendor table's
IDLE_CPU_PERCENT = 1.0


def finding(id: str, severity: Severity, message: str) -> Finding:
    """A verification result: the one findings type, with nothing to fix by hand."""
    return Finding(id=id, severity=severity, message=message)


def joined(expected: Sequence[int], ranks: Mapping[int, RankState], node_rank: int,
           world_size: int) -> Finding:
    """Expected against joined; the missing ones named by node and local rank."""
    missing = [ranks[r] for r in expected if r in ranks and not _is_joined(ranks[r])]
    count = f"{len(expected) - len(missing)}/{len(expected)} ranks on node {node_rank} joined"
    if world_size != len(expected):
        count += f" (world size {world_size})"
    if not missing:
        return finding("joined", "ok", count)
    names = ", ".join(r.where() for r in missing)
    return finding("joined", "error", f"{count}; missing: {names}")


def _is_joined(state: RankState) -> bool:
    return state.joined_at is not None or state.beat_time is not None


def bindings(ranks: Mapping[int, RankState]) -> list[Finding]:
    """Two ranks on one device of one node is an error naming both."""
    seen: dict[tuple[object, str], int] = {}
    out = []
    for rank in sorted(ranks):
        state = ranks[rank]
        if not state.device or state.device.split(":")[0] in SHARED_DEVICES:
            continue
        key = (state.host or state.node_rank, state.device)
        if key in seen:
            other = ranks[seen[key]]
            out.append(finding("shared-device", "error",
                             f"{other.where()} and {state.where()} are both bound to "
                             f"{state.device}: each rank needs its own device (check "
                             "LOCAL_RANK and the visible-device variable of each process)"))
        else:
            seen[key] = rank
    return out


def ordinal(state: RankState) -> int | None:
    """The rank's device ordinal: ``cuda:3`` -> 3; torchrun's LOCAL_RANK when not reported."""
    if state.device and ":" in state.device:
        tail = state.device.rsplit(":", 1)[1]
        return int(tail) if tail.isdigit() else None
    return state.local_rank


def device_activity(device_type: str, visible: Sequence[int], ranks: Mapping[int, RankState],
                    reading: DeviceReading, node_rank: int) -> list[Finding]:
    """Devices no rank uses; used devices that show no process or no utilisation."""
    used: dict[int, RankState] = {}
    for state in ranks.values():
        index = ordinal(state)
        if index is not None and 0 <= index < len(visible):
            used[visible[index]] = state
    out = []
    idle = [d for d in visible if d not in used]
    if idle:
        out.append(finding("idle-devices", "warning",
                         f"{len(idle)} of {len(visible)} {device_type} devices on node "
                         f"{node_rank} are idle: no rank uses device(s) "
                         f"{', '.join(map(str, idle))}; {len(used)} process(es) for "
                         f"{len(visible)} devices (start one per device: --nproc-per-node "
                         f"{len(visible)})"))
    if reading.unavailable:
        out.append(finding("device-metrics", "info",
                         f"device utilisation not available: {reading.unavailable}"))
        return out
    samples = {d.index: d for d in reading.devices}
    for index, state in sorted(used.items()):
        check = _busy(index, state, samples.get(index), device_type)
        if check is not None:
            out.append(check)
    return out


def _busy(index: int, state: RankState, sample: DeviceSample | None,
          device_type: str) -> Finding | None:
    label = f"{device_type} device {index} ({state.where()})"
    if sample is None:
        return finding("device-metrics", "info", f"{label}: not in the device tool's list")
    if sample.pids is not None and not sample.pids:
        return finding("device-idle", "warning", f"{label} shows no process: the rank is not "
                     "running on it")
    if sample.utilization_percent is not None and sample.utilization_percent <= 0:
        return finding("device-idle", "warning", f"{label} shows 0% utilisation after the "
                     "first steps")
    return None


def cpu_activity(ranks: Mapping[int, RankState], procs: Mapping[int, ProcSample]) -> list[Finding]:
    """On CPU, per-process CPU use stands in for device utilisation."""
    out = []
    for rank in sorted(ranks):
        state = ranks[rank]
        sample = procs.get(state.pid) if state.pid else None
        if sample is None or sample.cpu_percent is None:
            continue
        if not sample.alive:
            out.append(finding("rank-gone", "warning", f"{state.where()}: process {sample.pid} "
                             "is gone"))
        elif sample.cpu_percent < IDLE_CPU_PERCENT:
            out.append(finding("cpu-idle", "warning",
                             f"{state.where()} (pid {sample.pid}) used "
                             f"{sample.cpu_percent:.1f}% CPU since the first steps: it is idle"))
    return out
