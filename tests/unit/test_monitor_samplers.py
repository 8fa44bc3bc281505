"""Device samplers against replayed real values (this machine has no GPU).

NVML values: a GeForce GTX TITAN Z pair as NVML reported them in NVIDIA/DIGITS#497
(6134 MiB total, 771 MiB used, 9 % utilisation; 6143 MiB / 15 MiB / 0 %). nvidia-smi row:
a GeForce RTX 2080 from Ricks-Lab/gpu-utils#83 (86 %, 7979 MiB total), with its memory.used
field as "[N/A]" the way nvidia-smi prints a value a board cannot give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from distrun.accelerators.probes import ToolFailed, ToolMissing
from distrun.accelerators.sessions import NVML, open_session
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
    reading = devices.NvmlSampler(open_session(NVML, lambda name: fake_nvml(TITAN_Z))).read()
    assert reading.source == "nvml" and not reading.unavailable
    assert reading.devices == (
        DeviceSample(0, "GeForce GTX TITAN Z", 9.0, 771 * MIB, 6134 * MIB, (4242,), "nvml"),
        DeviceSample(1, "GeForce GTX TITAN Z", 0.0, 15 * MIB, 6143 * MIB, (), "nvml"),
    )


def test_nvml_metric_not_supported_is_not_available_not_a_crash() -> None:
    board = {**TITAN_Z[0], "util": None, "pids": None}
    (sample,) = devices.NvmlSampler(open_session(NVML, lambda name: fake_nvml([board]))).read().devices
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


def test_nvidia_smi_h100_capture_names_the_process_on_the_gpu() -> None:
    """The monitor's two queries on an H100 while pid 997 held memory (tests/gpu captured it)."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "nvidia"
    answers = {devices.SMI_GPUS: (fixtures / "nvidia-smi-sample-gpus-h100.csv").read_text(),
               devices.SMI_APPS: (fixtures / "nvidia-smi-sample-apps-h100.csv").read_text()}
    (sample,) = devices.SmiSampler(lambda argv: answers[tuple(argv)]).read().devices
    assert sample == DeviceSample(0, "NVIDIA H100 80GB HBM3", 2.0, 1551 * MIB, 81559 * MIB,
                                  (997,), "nvidia-smi")


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
    reading = devices.for_vendor("moorethreads").read()
    assert reading.devices == () and "moorethreads" in reading.unavailable


# Intel, Ascend, Enflame, Cambricon: the vendor tool's real output replayed
# (tests/fixtures/tools/SOURCES.md says where each capture comes from).

TOOLS = Path(__file__).parents[1] / "fixtures" / "tools"


def replay(**outputs: str) -> Callable[[Sequence[str]], str]:
    """A runner answering each argv (joined by spaces) with the named fixture."""

    def run(argv: Sequence[str]) -> str:
        name = outputs.get(" ".join(argv))
        if name is None:
            raise ToolMissing(argv[0])
        return (TOOLS / name).read_text()

    return run


def npu_smi(name: str) -> list[DeviceSample]:
    run = replay(**{"npu-smi info": f"ascend/{name}"})
    reading = devices.for_vendor("ascend", run).read()
    assert reading.source == "npu-smi" and not reading.unavailable
    return list(reading.devices)


def test_ascend_a3_aicore_hbm_and_processes_per_chip() -> None:
    chips = npu_smi("npu-smi-info-a3-ascend910-16chip.txt")
    assert [c.index for c in chips] == list(range(16))
    assert chips[0] == DeviceSample(
        0, "Ascend910", 7.0, 61609 * MIB, 65536 * MIB,
        (935440, 936673, 930242, 934451, 931572, 941045, 942487, 929673), "npu-smi")
    assert (chips[1].memory_used_bytes, chips[1].pids) == (61625 * MIB, (929405,))
    assert (chips[8].utilization_percent, chips[8].pids) == (8.0, (934451,))
    assert chips[15].pids == (944268,)


def test_ascend_310p_ddr_usage_and_no_running_processes() -> None:
    chips = npu_smi("npu-smi-info-310p3-6x.txt")
    assert chips[1] == DeviceSample(1, "310P3", 0.0, 1852 * MIB, 21527 * MIB, (), "npu-smi")
    duo = npu_smi("npu-smi-info-310p3-duo.txt")
    assert [(c.index, c.memory_used_bytes, c.pids) for c in duo] == [
        (0, 1475 * MIB, ()), (1, 1462 * MIB, ())]


def test_ascend_without_process_table_has_pids_not_available() -> None:
    first = npu_smi("npu-smi-info-910b3-8x.txt")[0]
    assert first == DeviceSample(0, "910B3", 0.0, 3318 * MIB, 65536 * MIB, None, "npu-smi")


def test_enflame_dused_and_memory_size_no_use_no_processes() -> None:
    for name, total in (("efsmi-s60-2x-v1.2.0.301.txt", 49120),
                        ("efsmi-s60g-2x-v1.6.3.12.txt", 23552)):
        run = replay(efsmi=f"enflame/{name}")
        first, second = devices.for_vendor("enflame", run).read().devices
        assert first.utilization_percent == 0.0 and first.memory_total_bytes == total * MIB
        assert first.memory_used_bytes is None and first.pids is None
        assert second.index == 1 and first.source == "efsmi"
    run = replay(efsmi="enflame/efsmi-s60-2x-v1.2.0.301.txt")
    assert devices.for_vendor("enflame", run).read().devices[1].memory_total_bytes == 42976 * MIB


def test_cambricon_util_memory_and_no_running_processes() -> None:
    for name, count in (("cnmon-mlu370-x4-2x-v5.10.10.txt", 2),
                        ("cnmon-mlu370-x4-3x-v4.20.11.txt", 3)):
        run = replay(cnmon=f"cambricon/{name}")
        cards = devices.for_vendor("cambricon", run).read().devices
        assert cards == tuple(
            DeviceSample(i, "MLU370-X4", 0.0, 0, 23308 * MIB, (), "cnmon") for i in range(count))


def test_intel_stats_memory_used_and_utilisation_not_reported() -> None:
    stats = {f"xpu-smi stats -d {i} -j": f"intel/xpu-smi-stats-d{i}-j-arc-pro-b70.json"
             for i in range(4)}
    run = replay(**{"xpu-smi discovery -j": "intel/xpu-smi-discovery-j-4x-arc-pro-b70.json"},
                 **stats)
    reading = devices.for_vendor("intel", run).read()
    assert reading.source == "xpu-smi" and not reading.unavailable
    name = "Intel(R) Arc(TM) Pro B70 Graphics"
    assert reading.devices == (
        DeviceSample(0, name, None, int(44.78515625 * MIB), None, None, "xpu-smi"),
        DeviceSample(1, name, None, int(44.78515625 * MIB), None, None, "xpu-smi"),
        DeviceSample(2, name, None, int(44.78125 * MIB), None, None, "xpu-smi"),
        DeviceSample(3, name, None, int(44.78125 * MIB), None, None, "xpu-smi"),
    )


def test_intel_stats_failing_for_a_device_is_not_available_for_it() -> None:
    run = replay(**{"xpu-smi discovery -j": "intel/xpu-smi-discovery-j-vendor-doc.json"})
    (sample,) = devices.for_vendor("intel", run).read().devices
    assert sample.index == 0 and sample.utilization_percent is None
    assert sample.memory_used_bytes is None and "xpu-smi is not on PATH" in sample.note


VENDOR_TOOLS = {"intel": "xpu-smi", "ascend": "npu-smi", "enflame": "efsmi",
                "cambricon": "cnmon"}


@pytest.mark.parametrize("vendor", sorted(VENDOR_TOOLS))
def test_tool_missing_or_failing_is_not_available(vendor: str) -> None:
    def missing(argv: Sequence[str]) -> str:
        raise ToolMissing(argv[0])

    def failing(argv: Sequence[str]) -> str:
        raise ToolFailed(f"{' '.join(argv)} exited 255: dcmi module initialize failed")

    tool = VENDOR_TOOLS[vendor]
    reading = devices.for_vendor(vendor, missing).read()
    assert reading.devices == () and reading.unavailable == f"{tool} is not on PATH"
    reading = devices.for_vendor(vendor, failing).read()
    assert reading.devices == () and "exited 255" in reading.unavailable


@pytest.mark.parametrize("vendor", sorted(VENDOR_TOOLS))
@pytest.mark.parametrize("garbage", ["", "Segmentation fault\n", "{\"device_list\": 3}",
                                     "\x00\x01|||\n+--+\n"])
def test_garbage_output_is_not_available_not_a_crash(vendor: str, garbage: str) -> None:
    reading = devices.for_vendor(vendor, lambda argv: garbage).read()
    assert reading.devices == () and reading.unavailable


def fixture_runs() -> list[tuple[str, str]]:
    vendor_of = {"ascend": "ascend", "enflame": "enflame", "cambricon": "cambricon",
                 "intel": "intel"}
    return [(vendor_of[p.parent.name], str(p.relative_to(TOOLS)))
            for p in sorted(TOOLS.glob("*/*")) if p.parent.name in vendor_of]


@pytest.mark.parametrize(("vendor", "name"), fixture_runs())
def test_truncated_real_output_never_raises(vendor: str, name: str) -> None:
    """Every line-prefix of each real capture (a tool killed mid-print) reads without an
    exception, for any of the vendor's commands answered with it."""
    lines = (TOOLS / name).read_text().splitlines(keepends=True)
    for cut in range(len(lines) + 1):
        text = "".join(lines[:cut])
        reading = devices.for_vendor(vendor, lambda argv, text=text: text).read()
        assert all(isinstance(d, DeviceSample) for d in reading.devices)
