from __future__ import annotations

import pytest

from distrun.accelerators.inventory import Device, apply_visibility, parse_declared
from distrun.accelerators.vendors import VENDORS, VendorId, vendor_for_model
from distrun.errors import UsageError


@pytest.mark.parametrize(("model", "vendor"), [
    ("H100-80GB", VendorId.NVIDIA), ("A100", VendorId.NVIDIA), ("MI300X", VendorId.AMD),
    ("gcu", VendorId.ENFLAME), ("T20", VendorId.ENFLAME), ("910B", VendorId.ASCEND),
    ("MLU370", VendorId.CAMBRICON), ("xpu", VendorId.INTEL), ("cpu", VendorId.CPU),
    ("mps", VendorId.APPLE),
])
def test_model_words_name_the_vendor(model: str, vendor: VendorId) -> None:
    found = vendor_for_model(model)
    assert found is not None and found.id is vendor


def test_declared_inventory_has_nodes_devices_and_memory() -> None:
    nodes = parse_declared("2x8xH100-80GB")
    assert len(nodes) == 2
    assert [n.host for n in nodes] == ["node0", "node1"]
    assert all(n.count == 8 and n.vendor is VendorId.NVIDIA for n in nodes)
    assert nodes[0].devices[0].memory_bytes == 80 * 2**30


def test_declared_single_node_shorthand() -> None:
    (node,) = parse_declared("8xgcu")
    assert node.vendor is VendorId.ENFLAME and node.count == 8
    assert node.info.backend == "eccl" and node.info.visibility_var == "TOPS_VISIBLE_DEVICES"


@pytest.mark.parametrize("text", ["2x8", "two-by-eight", "2x8xWidget9000", "0x8xH100"])
def test_malformed_inventory_is_a_usage_error_naming_the_value(text: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_declared(text)
    assert text in str(err.value) and "fix:" in str(err.value)


def _gpus(n: int) -> tuple[Device, ...]:
    return tuple(Device(VendorId.NVIDIA, i, "H100", uuid=f"GPU-{i:04d}aaaa") for i in range(n))


def test_visibility_filters_and_orders_by_the_variable() -> None:
    visible, value, invalid = apply_visibility(VendorId.NVIDIA, _gpus(8),
                                               {"CUDA_VISIBLE_DEVICES": "3,1"})
    assert [d.index for d in visible] == [3, 1] and value == "3,1" and invalid == ()


def test_visibility_accepts_uuid_prefixes() -> None:
    visible, _, _ = apply_visibility(VendorId.NVIDIA, _gpus(4), {"CUDA_VISIBLE_DEVICES": "GPU-0002"})
    assert [d.index for d in visible] == [2]


def test_visibility_reports_ordinals_the_node_lacks() -> None:
    value = ",".join(map(str, range(16)))
    visible, _, invalid = apply_visibility(VendorId.NVIDIA, _gpus(8), {"CUDA_VISIBLE_DEVICES": value})
    assert len(visible) == 8
    assert invalid == tuple(str(i) for i in range(8, 16))


def test_visibility_unset_means_all_and_other_vendors_variables_are_ignored() -> None:
    visible, value, _ = apply_visibility(VendorId.ENFLAME, _gpus(2), {"CUDA_VISIBLE_DEVICES": "0"})
    assert len(visible) == 2 and value is None


def test_every_vendor_row_is_complete() -> None:
    for vendor in VENDORS.values():
        assert vendor.backends and vendor.torch_device
        assert vendor.id is VendorId.APPLE or vendor.tools
