"""Replay real tool output (tests/fixtures/tools, provenance in SOURCES.md) through each probe."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from distrun.accelerators.probes import (
    ProbeResult,
    Runner,
    ToolFailed,
    ToolMissing,
    amd,
    ascend,
    cambricon,
    enflame,
    intel,
    nvidia,
)
from distrun.accelerators.vendors import VendorId

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tools"
MIB = 2**20
ProbeFn = Callable[[dict[str, str], Runner], ProbeResult]


def replay(argv: Sequence[str], fixture: str) -> Runner:
    """A runner answering ``argv`` with the fixture's text and ToolMissing for anything else."""
    text = (FIXTURES / fixture).read_text(encoding="utf-8")

    def run(called: Sequence[str]) -> str:
        if tuple(called) != tuple(argv):
            raise ToolMissing(called[0])
        return text

    return run


def answering(text: str) -> Runner:
    return lambda argv: text


def missing(argv: Sequence[str]) -> str:
    raise ToolMissing(argv[0])


def failing(message: str) -> Runner:
    def run(argv: Sequence[str]) -> str:
        raise ToolFailed(message)

    return run


@pytest.fixture(autouse=True)
def no_amdsmi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The amdsmi library must not answer for the CLI paths under test."""
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "amdsmi":
            raise ImportError("amdsmi blocked in tests")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


# --- Ascend -----------------------------------------------------------------------------


def test_ascend_910b3_eight_cards() -> None:
    run = replay(ascend.SMI_INFO, "ascend/npu-smi-info-910b3-8x.txt")
    result = ascend.probe({}, run)
    assert result.status == "found" and result.source == "npu-smi"
    assert [d.index for d in result.devices] == list(range(8))
    assert {d.name for d in result.devices} == {"910B3"}
    assert all(d.memory_bytes == 65536 * MIB for d in result.devices)
    assert result.devices[0].bus_id == "0000:C1:00.0"
    assert result.devices[7].bus_id == "0000:42:00.0"
    assert result.driver == "24.1.rc1.b030"


def test_ascend_a3_two_chips_per_npu_use_phy_id() -> None:
    run = replay(ascend.SMI_INFO, "ascend/npu-smi-info-a3-ascend910-16chip.txt")
    result = ascend.probe({}, run)
    assert result.status == "found"
    assert [d.index for d in result.devices] == list(range(16))
    assert {d.name for d in result.devices} == {"Ascend910"}
    assert all(d.memory_bytes == 65536 * MIB for d in result.devices)
    assert result.devices[1].bus_id == "0000:9F:00.0"
    assert result.devices[15].bus_id == "0000:83:00.0"
    assert result.driver == "25.2.0"


def test_ascend_310p_sparse_npu_ids_use_device_column() -> None:
    run = replay(ascend.SMI_INFO, "ascend/npu-smi-info-310p3-6x.txt")
    result = ascend.probe({}, run)
    assert result.status == "found"
    assert [d.index for d in result.devices] == [0, 1, 2, 3, 4, 5]
    assert {d.name for d in result.devices} == {"310P3"}
    assert all(d.memory_bytes == 21527 * MIB for d in result.devices)
    assert result.devices[3].bus_id == "0000:81:00.0"


def test_ascend_300i_duo_two_chips_one_card() -> None:
    run = replay(ascend.SMI_INFO, "ascend/npu-smi-info-310p3-duo.txt")
    result = ascend.probe({}, run)
    assert [d.index for d in result.devices] == [0, 1]
    assert [d.memory_bytes for d in result.devices] == [44280 * MIB, 43693 * MIB]
    assert result.driver == "25.0.rc1.1"


# --- Intel ------------------------------------------------------------------------------


def test_intel_four_arc_pro_b70() -> None:
    run = replay(intel.DISCOVERY, "intel/xpu-smi-discovery-j-4x-arc-pro-b70.json")
    result = intel.probe({}, run)
    assert result.status == "found" and result.source == "xpu-smi"
    assert [d.index for d in result.devices] == [0, 1, 2, 3]
    assert {d.name for d in result.devices} == {"Intel(R) Arc(TM) Pro B70 Graphics"}
    assert all(d.memory_bytes is None for d in result.devices)  # the list carries no size
    assert result.devices[2].bus_id == "0000:43:00.0"
    assert result.devices[3].uuid == "00000000-0000-0047-0000-0000e2238086"


def test_intel_vendor_doc_sample() -> None:
    run = replay(intel.DISCOVERY, "intel/xpu-smi-discovery-j-vendor-doc.json")
    result = intel.probe({}, run)
    assert [(d.index, d.name, d.bus_id) for d in result.devices] == [
        (0, "Intel(R) Graphics [0x020a]", "0000:4d:00.0")
    ]


# --- AMD --------------------------------------------------------------------------------


def test_amd_library_is_absent_here() -> None:
    assert amd.probe_amdsmi() is None


def test_amd_rocm_smi_json() -> None:
    run = replay(amd.ROCM_SMI, "amd/rocm-smi-json-rx7900xt.json")
    result = amd.probe({}, run)
    assert result.status == "found" and result.source == "rocm-smi"
    [device] = result.devices
    assert (device.index, device.name) == (0, "Radeon RX 7900 XT")
    assert device.memory_bytes == 21458059264
    assert device.uuid is None and device.bus_id is None  # not in this capture


def test_nvidia_smi_h100_capture_when_nvml_is_absent() -> None:
    """Real output of the probe's own query on an H100 (tests/gpu captured it)."""
    run = replay(nvidia.SMI_QUERY, "nvidia/nvidia-smi-query-h100.csv")
    result = nvidia.probe({}, run)  # no NVML library here: the fallback answers
    assert (result.status, result.source, result.driver) == ("found", "nvidia-smi", "580.159.04")
    [device] = result.devices
    assert (device.index, device.name) == (0, "NVIDIA H100 80GB HBM3")
    assert device.memory_bytes == 81559 * MIB
    assert device.uuid == "GPU-7ac45909-12fe-2de3-e1e2-19c524172c6a"
    assert device.bus_id == "00000000:00:06.0"


# --- Cambricon --------------------------------------------------------------------------


def test_cambricon_cnmon_5x() -> None:
    run = replay(cambricon.CNMON, "cambricon/cnmon-mlu370-x4-2x-v5.10.10.txt")
    result = cambricon.probe({}, run)
    assert result.status == "found" and result.source == "cnmon"
    assert [d.index for d in result.devices] == [0, 1]
    assert {d.name for d in result.devices} == {"MLU370-X4"}
    assert all(d.memory_bytes == 23308 * MIB for d in result.devices)
    assert [d.bus_id for d in result.devices] == ["0000:1B:00.0", "0000:36:00.0"]
    assert result.driver == "5.10.10"


def test_cambricon_cnmon_4x_has_no_bus_id() -> None:
    run = replay(cambricon.CNMON, "cambricon/cnmon-mlu370-x4-3x-v4.20.11.txt")
    result = cambricon.probe({}, run)
    assert [d.index for d in result.devices] == [0, 1, 2]
    assert all(d.memory_bytes == 23308 * MIB for d in result.devices)
    assert all(d.bus_id is None for d in result.devices)
    assert result.driver == "4.20.11"


# --- Enflame ----------------------------------------------------------------------------


def test_enflame_efsmi_1_2() -> None:
    run = replay(enflame.EFSMI, "enflame/efsmi-s60-2x-v1.2.0.301.txt")
    result = enflame.probe({}, run)
    assert result.status == "found" and result.source == "efsmi"
    assert [d.index for d in result.devices] == [0, 1]
    assert {d.name for d in result.devices} == {"S60"}
    assert [d.memory_bytes for d in result.devices] == [49120 * MIB, 42976 * MIB]
    assert [d.bus_id for d in result.devices] == ["00:01:00.0", "00:09:00.0"]
    assert result.driver == "1.2.0.301"


def test_enflame_efsmi_1_6() -> None:
    run = replay(enflame.EFSMI, "enflame/efsmi-s60g-2x-v1.6.3.12.txt")
    result = enflame.probe({}, run)
    assert [d.index for d in result.devices] == [0, 1]
    assert {d.name for d in result.devices} == {"Enflame S60G"}
    assert all(d.memory_bytes == 23552 * MIB for d in result.devices)
    assert [d.bus_id for d in result.devices] == ["00:2e:00.0", "00:2f:00.0"]
    assert result.driver == "1.6.3.12"


# --- Every vendor: tool missing, tool failing, garbage -----------------------------------

VENDOR_PROBES: list[tuple[VendorId, ProbeFn, str]] = [
    (VendorId.AMD, amd.probe, "rocm-smi"),
    (VendorId.ASCEND, ascend.probe, "npu-smi"),
    (VendorId.CAMBRICON, cambricon.probe, "cnmon"),
    (VendorId.ENFLAME, enflame.probe, "efsmi"),
    (VendorId.INTEL, intel.probe, "xpu-smi"),
]
IDS = [v.value for v, _, _ in VENDOR_PROBES]


@pytest.mark.parametrize(("vendor", "probe", "tool"), VENDOR_PROBES, ids=IDS)
def test_tool_missing_is_absent(vendor: VendorId, probe: ProbeFn, tool: str) -> None:
    result = probe({}, missing)
    assert (result.vendor, result.status, result.devices) == (vendor, "absent", ())


@pytest.mark.parametrize(("vendor", "probe", "tool"), VENDOR_PROBES, ids=IDS)
def test_tool_failing_is_error_with_its_message(
    vendor: VendorId, probe: ProbeFn, tool: str
) -> None:
    message = f"{tool} exited 9: device driver is not loaded"
    result = probe({}, failing(message))
    assert (result.vendor, result.status, result.source) == (vendor, "error", tool)
    assert message in result.detail


@pytest.mark.parametrize("garbage", ["", "Segmentation fault\n", "{not json", "| 1 | 2 |\n"])
@pytest.mark.parametrize(("vendor", "probe", "tool"), VENDOR_PROBES, ids=IDS)
def test_garbage_is_error_not_exception(
    vendor: VendorId, probe: ProbeFn, tool: str, garbage: str
) -> None:
    result = probe({}, answering(garbage))
    assert (result.vendor, result.status, result.source) == (vendor, "error", tool)
    assert result.detail


def test_probes_do_not_touch_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "3")
    env = {"ASCEND_RT_VISIBLE_DEVICES": "1"}
    result = ascend.probe(env, replay(ascend.SMI_INFO, "ascend/npu-smi-info-910b3-8x.txt"))
    assert len(result.devices) == 8  # visibility is applied later, not by the probe
    assert env == {"ASCEND_RT_VISIBLE_DEVICES": "1"}
