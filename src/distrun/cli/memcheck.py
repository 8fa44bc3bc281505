"""The effects of the memory preflight: this node's devices (NVML or the vendor's tool, through
the monitor's samplers; /proc/meminfo for a CPU node) and the fit the last run of the script
stored (distrun.runtime.batchcache). The decision is estimate.preflight's pure function."""

from __future__ import annotations

import os
from collections.abc import Mapping

from distrun.estimate.preflight import HOST, DeviceMemory, StoredFit, planned_batch_findings
from distrun.model.plan import Finding, LaunchPlan


def device_memory(vendor: str, visible: list[int] | None = None) -> list[DeviceMemory]:
    """This node's devices as their vendor's library or tool reports them, with the names of
    the processes holding each; ``visible``: only these physical indices."""
    from distrun.monitor.devices import for_vendor

    sampler = for_vendor(vendor)
    try:
        reading = sampler.read()
    finally:
        sampler.close()
    return [DeviceMemory(d.index, d.name, d.memory_used_bytes, d.memory_total_bytes,
                         None if d.pids is None else tuple(named(p) for p in d.pids))
            for d in reading.devices if visible is None or d.index in visible]


def named(pid: int) -> str:
    import psutil

    try:
        return f"{pid} {psutil.Process(pid).name()}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return str(pid)


def host_memory() -> list[DeviceMemory]:
    """A CPU node's one "device": its memory (MemTotal, MemAvailable)."""
    info: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable") and rest.split():
                    info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError):
        return [DeviceMemory(0, HOST, None, None)]
    total, free = info.get("MemTotal"), info.get("MemAvailable")
    used = None if total is None or free is None else total - free
    return [DeviceMemory(0, HOST, used, total)]


def stored_fit(env: Mapping[str, str], script: str, device_model: str,
               world_size: int) -> StoredFit | None:
    from distrun.runtime import batchcache

    raw = batchcache.load_fit(env, batchcache.fit_key(script, device_model, world_size))
    if raw is None:
        return None
    sizes = raw.get("sizes")
    return StoredFit(float(raw["intercept"]), float(raw["slope"]),
                     tuple(int(s) for s in sizes if isinstance(s, int))
                     if isinstance(sizes, list) else (),
                     str(raw.get("source", "")), str(raw.get("time", "")))


def launch_findings(plan: LaunchPlan, node_rank: int, env: Mapping[str, str]) -> list[Finding]:
    """The memory preflight of ``distrun launch`` on this node."""
    node = next((n for n in plan.nodes if n.node_rank == node_rank), plan.nodes[0])
    cpu = plan.device_type == "cpu"
    devices = host_memory() if cpu else device_memory(plan.vendor, node.visible_devices)
    raw = plan.env.get("DISTRUN_PER_DEVICE_BATCH_SIZE", "")
    batch = int(raw) if raw.isdigit() else None
    script = plan.script or ""
    fit = None
    if batch is not None and script and os.path.isfile(script) and devices:
        model = "cpu" if cpu else devices[0].name
        fit = stored_fit(env, script, model, plan.world_size)
    return planned_batch_findings(devices, batch, fit, script=os.path.basename(script) or "the script",
                                  per_device=node.nproc if cpu else 1)
