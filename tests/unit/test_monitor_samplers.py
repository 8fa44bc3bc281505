"""Device samplers against replayed real values (this machine has no GPU).

NVML values: a GeForce GTX TITAN Z pair as NVML reported them in NVIDIA/DIGITS#497
(6134 MiB total, 771 MiB used, 9 % utilisation; 6143 MiB / 15 MiB / 0 %). nvidia-smi row:
a GeForce RTX 2080 from Ricks-Lab/gpu-utils#83 (86 %, 7979 MiB total), with its memory.used
field as "[N/A]" the way nvidia-smi prints a value a board cannot give.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from distrun.accelerators.probes import ToolMissing
from distrun.monitor import devices
from distrun.monitor.samples import DeviceSample

MIB = 2**20


class NVMLError(Exception):
    pass


def fake_nvml(boards: list[dict[str, Any]]) -> SimpleNamespace:
    """pynvml's functions over recorded values; a missing value raises NVMLError as
    NVML_ERROR_NOT_SUPPORTED does."""

    def value(index: int, key: str) -> Any:
        v = boards[index].get(key)
        if v is None:
            raise NVMLError("Not Supported")
        return v

    return SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(boards),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: value(h, "name"),
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=value(h, "util"), memory=0),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=value(h, "used"),
                                                          total=value(h, "total")),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=p, usedGpuMemory=None) for p in value(h, "pids")],
    )


TITAN_Z = [
    {"name": b"GeForce GTX TITAN Z", "util": 9, "used": 771 * MIB, "total": 6134 * MIB,
     "pids": [4242]},
    {"name": b"GeForce GTX TITAN Z", "util": 0, "used": 15 * MIB, "total": 6143 * MIB,
     "pids": []},
]


def test_nvml_sampler_reads_utilisation_memory_and_processes() -> None:
    reading = devices.NvmlSampler(fake_nvml(TITAN_Z)).read()
    assert reading.source == "nvml" and not reading.unavailable
    assert reading.devices == (
        DeviceSample(0, "GeForce GTX TITAN Z", 9.0, 771 * MIB, 6134 * MIB, (4242,), "nvml"),
        DeviceSample(1, "GeForce GTX TITAN Z", 0.0, 15 * MIB, 6143 * MIB, (), "nvml"),
    )


def test_nvml_metric_not_supported_is_not_available_not_a_crash() -> None:
    board = {**TITAN_Z[0], "util": None, "pids": None}
    (sample,) = devices.NvmlSampler(fake_nvml([board])).read().devices
    assert sample.utilization_percent is None and sample.pids is None
    assert sample.memory_used_bytes == 771 * MIB


SMI_GPUS = "0, GeForce RTX 2080, 86, [N/A], 7979, GPU-22b2c6ac-2d49-4863-197c-9c469071178a\n"
SMI_APPS = "GPU-22b2c6ac-2d49-4863-197c-9c469071178a, 31337, 5120\n"


def test_nvidia_smi_fallback_parses_both_queries() -> None:
    def run(argv: Sequence[str]) -> str:
        return SMI_GPUS if argv == devices.SMI_GPUS else SMI_APPS

    (sample,) = devices.SmiSampler(run).read().devices
    assert sample == DeviceSample(0, "GeForce RTX 2080", 86.0, None, 7979 * MIB, (31337,),
                                  "nvidia-smi")


def test_nvidia_without_nvml_or_smi_says_why() -> None:
    def run(argv: Sequence[str]) -> str:
        raise ToolMissing("nvidia-smi")

    sampler = devices.for_vendor("nvidia", run, importer=lambda name: None)
    reading = sampler.read()
    assert reading.devices == () and reading.unavailable.startswith("nvidia-smi:")


class AmdSmiException(Exception):
    pass


def test_amdsmi_sampler_reads_activity_vram_and_processes_with_na() -> None:
    lib = SimpleNamespace(
        AmdSmiException=AmdSmiException, amdsmi_init=lambda: None, amdsmi_shut_down=lambda: None,
        amdsmi_get_processor_handles=lambda: ["h0", "h1"],
        amdsmi_get_gpu_activity=lambda h: {"gfx_activity": 100 if h == "h0" else "N/A",
                                           "umc_activity": 2, "mm_activity": "N/A"},
        amdsmi_get_gpu_vram_usage=lambda h: {"vram_total": 196592, "vram_used": 283},
        amdsmi_get_gpu_process_list=lambda h: [{"name": "python", "pid": 77, "mem": 0}]
        if h == "h0" else [],
        amdsmi_get_gpu_asic_info=lambda h: {"market_name": "AMD Instinct MI300X"},
    )
    first, second = devices.for_vendor("amd", importer=lambda name: lib).read().devices
    assert first == DeviceSample(0, "AMD Instinct MI300X", 100.0, 283 * MIB, 196592 * MIB,
                                 (77,), "amdsmi")
    assert second.utilization_percent is None and second.pids == ()


def test_vendors_without_a_sampler_are_not_available_with_the_reason() -> None:
    reading = devices.for_vendor("enflame").read()
    assert reading.devices == () and "enflame" in reading.unavailable
