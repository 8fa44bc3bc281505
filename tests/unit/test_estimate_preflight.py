"""Preflight on device memory, over replayed nvidia-smi output (this machine has no GPU).

The rows are an H100 80GB's ``nvidia-smi --query-gpu=...,memory.used,memory.total,uuid`` and
``--query-compute-apps`` lines in the format of NVIDIA's documentation (values in MiB)."""

from __future__ import annotations

from distrun.estimate.preflight import DeviceMemory, memory_findings
from distrun.estimate.states import Setup, model_states
from distrun.monitor.devices import parse_smi

MIB = 2**20
GPUS = ("0, NVIDIA H100 80GB HBM3, 0, 1, 81559, GPU-aaaaaaaa-1111-2222-3333-444444444444\n"
        "1, NVIDIA H100 80GB HBM3, 97, 61234, 81559, GPU-bbbbbbbb-1111-2222-3333-444444444444\n"
        "2, NVIDIA H100 80GB HBM3, 0, [N/A], 81559, GPU-cccccccc-1111-2222-3333-444444444444\n")
APPS = "GPU-bbbbbbbb-1111-2222-3333-444444444444, 48213, 61220\n"


def _devices() -> list[DeviceMemory]:
    reading = parse_smi(GPUS, APPS)
    names = {48213: "48213 python"}
    return [DeviceMemory(d.index, d.name, d.memory_used_bytes, d.memory_total_bytes,
                         None if d.pids is None else tuple(names[p] for p in d.pids))
            for d in reading.devices]


def test_busy_device_insufficient_memory_and_unknown() -> None:
    need = model_states(Setup(1_300_000_000, "adamw", "bf16", "ddp")).total  # 23.4 GB
    found = memory_findings(_devices(), need, "1.30B parameters (adamw, ddp)")
    by_id = [(f.id, f.severity) for f in found]
    assert by_id == [("device-busy", "warning"), ("memory-insufficient", "error"),
                     ("memory-unknown", "info")]
    assert found[0].message == ("device 1 (NVIDIA H100 80GB HBM3) already holds 59.8 GiB for "
                                "other processes: 48213 python")
    assert found[1].message == ("device 1 (NVIDIA H100 80GB HBM3): 19.8 GiB free, 1.30B "
                                "parameters (adamw, ddp) needs 21.8 GiB per device by the "
                                "estimate")
    assert found[2].status == "unknown"


def test_fits_everywhere_with_zero3() -> None:
    need = model_states(Setup(1_300_000_000, "adamw", "bf16", "zero3", 8, 8)).total
    assert [f.id for f in memory_findings(_devices(), need)] == ["device-busy", "memory-unknown"]
