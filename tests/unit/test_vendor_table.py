"""The one vendor table: the facts exporters, samplers and the runtime read, and the one
session helper for the vendor management libraries."""

from __future__ import annotations

from types import SimpleNamespace

from distrun.accelerators.sessions import AMDSMI, NVML, open_session
from distrun.accelerators.vendors import (
    EXTENSION_ORDER,
    SHARED_DEVICE_TYPES,
    VENDORS,
    SamplerKind,
    VendorId,
    vendor_named,
)
from distrun.monitor import devices


def test_every_accelerator_has_a_sampler_and_only_cpu_and_apple_share_a_device() -> None:
    for vendor in VENDORS.values():
        assert vendor.shares_device == (vendor.id in (VendorId.CPU, VendorId.APPLE))
        assert (vendor.sampler == SamplerKind.NONE) == vendor.shares_device
    assert {"cpu", "mps"} == SHARED_DEVICE_TYPES


def test_runtime_extension_order_is_the_vendors_with_a_torch_extension() -> None:
    assert [VENDORS[v].module for v in EXTENSION_ORDER] == ["torch_npu", "torch_gcu", "torch_mlu"]


def test_unknown_vendor_name_is_none_and_gets_a_sampler_that_says_why() -> None:
    assert vendor_named("moorethreads") is None
    reading = devices.for_vendor("moorethreads").read()
    assert "no device sampler for moorethreads" in (reading.unavailable or "")


class NVMLError(Exception):
    pass


def test_session_tells_missing_library_from_one_that_failed_to_start() -> None:
    missing = open_session(NVML, lambda name: None)
    assert (missing.lib, missing.importable) == (None, False)
    assert "nvidia-ml-py" in missing.why

    def no_driver() -> None:
        raise NVMLError("Driver Not Loaded")

    broken = open_session(NVML, lambda name: SimpleNamespace(NVMLError=NVMLError,
                                                            nvmlInit=no_driver))
    assert (broken.lib, broken.importable, broken.why) == (None, True, "NVML: Driver Not Loaded")


def test_session_closes_once_and_a_failing_shutdown_is_not_an_error() -> None:
    calls: list[str] = []

    class AmdSmiException(Exception):
        pass

    def shut() -> None:
        calls.append("shut")
        raise AmdSmiException("already shut")

    lib = SimpleNamespace(AmdSmiException=AmdSmiException, amdsmi_init=lambda: calls.append("init"),
                          amdsmi_shut_down=shut)
    session = open_session(AMDSMI, lambda name: lib)
    session.close()
    assert calls == ["init", "shut"]


def test_amd_sampler_without_library_names_the_package() -> None:
    reading = devices.for_vendor("amd", importer=lambda name: None).read()
    assert "amdsmi is not importable" in (reading.unavailable or "")
