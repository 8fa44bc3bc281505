from __future__ import annotations

import pytest

from distrun.accelerators.inventory import Device, NodeInventory, parse_declared
from distrun.accelerators.vendors import VendorId
from distrun.checks.preflight import checked_plan as build
from distrun.errors import UsageError
from distrun.plan import Request


def ids(plan) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {f.id: f.severity for f in plan.findings}


def test_two_nodes_of_eight_configured_as_sixteen_per_node_is_an_error() -> None:
    plan = build(Request(script="train.py", nnodes="2", nproc_per_node="16"),
                 parse_declared("2x8xH100-80GB"))
    (err,) = plan.errors
    assert err.id == "nproc-exceeds-devices"
    assert "16" in err.message and "8" in err.message
    assert "--nproc-per-node 8" in err.fix
    assert "local ranks 8-15 would fail" in err.message


def test_one_process_too_many_on_one_gpu_names_that_local_rank() -> None:
    """Seen on a real H100 machine (tests/gpu): the message read "1 NVIDIA devices: local
    ranks 1-1"."""
    plan = build(Request(script="train.py", nproc_per_node="2"), parse_declared("1x1xH100-80GB"))
    (err,) = plan.errors
    assert "but each node has 1 NVIDIA device: local rank 1 would fail" in err.message


def test_two_by_eight_layout() -> None:
    plan = build(Request(script="train.py", nnodes="2", nproc_per_node="8"),
                 parse_declared("2x8xH100-80GB"))
    assert plan.errors == []
    assert plan.world_size == 16 and plan.backend == "nccl"
    assert plan.nodes[0].ranks == list(range(8)) and plan.nodes[1].ranks == list(range(8, 16))
    assert all(n.visible_devices == list(range(8)) for n in plan.nodes)
    assert "--node-rank 1" in plan.commands[1]
    assert plan.commands[0].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 torchrun")


def test_one_node_sixteen_suggests_two_nodes() -> None:
    plan = build(Request(script="t.py", nproc_per_node="16"), parse_declared("1x8xH100"))
    assert "--nnodes 2 --nproc-per-node 8" in plan.errors[0].fix


def test_default_nproc_is_one_per_device_and_backend_follows_vendor() -> None:
    plan = build(Request(script="t.py"), parse_declared("1x8xgcu"))
    assert plan.nproc_per_node == 8 and plan.backend == "eccl" and plan.device_type == "gcu"
    assert plan.nodes[0].env == {"TOPS_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}


def test_one_process_on_eight_devices_warns_idle() -> None:
    plan = build(Request(script="t.py", nproc_per_node="1"), parse_declared("1x8xgcu"))
    assert ids(plan) == {"idle-devices": "warning"}
    assert "7 device(s)" in plan.findings[0].message


def test_nccl_on_cpu_is_a_backend_mismatch() -> None:
    plan = build(Request(script="t.py", backend="nccl"), parse_declared("1x4xcpu"))
    assert ids(plan) == {"backend-mismatch": "error"}
    assert "gloo" in plan.findings[0].fix


def test_unknown_backend() -> None:
    plan = build(Request(script="t.py", backend="nclc"), parse_declared("1x4xcpu"))
    assert ids(plan) == {"backend-unknown": "error"}


def test_node_rank_beyond_nnodes() -> None:
    plan = build(Request(script="t.py", nnodes="2", node_rank=2, master_addr="h"),
                 parse_declared("2x8xH100"))
    assert ids(plan)["node-rank-out-of-range"] == "error"


def test_multi_node_on_a_detected_node_needs_a_master() -> None:
    node = NodeInventory(VendorId.CPU, (Device(VendorId.CPU, 0, "cpu"),), cpus=8)
    plan = build(Request(script="t.py", nnodes="2"), (node,))
    assert ids(plan)["master-missing"] == "error"


def test_visible_list_naming_missing_ordinals() -> None:
    devices = tuple(Device(VendorId.NVIDIA, i, "H100") for i in range(8))
    node = NodeInventory(VendorId.NVIDIA, devices, visibility="0,1,2,3,4,5,6,7,8,9",
                         invalid_visible=("8", "9"), physical_count=8)
    plan = build(Request(script="t.py"), (node,))
    err = next(f for f in plan.findings if f.id == "visible-device-missing")
    assert "8,9" in err.message and "8 devices" in err.message


@pytest.mark.parametrize(("gbs", "per", "ok"), [(64, 4, True), (60, 4, False), (48, None, True)])
def test_global_batch_divides(gbs: int, per: int | None, ok: bool) -> None:
    plan = build(Request(script="t.py", nproc_per_node="8", global_batch_size=gbs,
                         per_device_batch_size=per), parse_declared("1x8xH100"))
    assert (plan.errors == []) is ok
    if not ok:
        assert "60" in plan.errors[0].message and "32" in plan.errors[0].message


def test_single_node_picks_the_port_at_start() -> None:
    plan = build(Request(script="t.py", nproc_per_node="2"), parse_declared("1x2xcpu"))
    assert plan.master_port == 0 and plan.rdzv_endpoint == "localhost:0"
    assert "--standalone" in plan.commands[0]


def test_rdzv_endpoint_is_the_master() -> None:
    plan = build(Request(script="t.py", nnodes="2", rdzv_endpoint="10.0.0.1:29400",
                         rdzv_id="job7"), parse_declared("2x8xH100"))
    assert (plan.master_addr, plan.master_port, plan.rdzv_backend) == ("10.0.0.1", 29400, "c10d")
    assert "--rdzv-id job7" in plan.commands[0]


@pytest.mark.parametrize(("field", "value"), [("nnodes", "x"), ("nnodes", "3:1"),
                                              ("nproc_per_node", "many"), ("nproc_per_node", "0")])
def test_bad_topology_values_are_usage_errors(field: str, value: str) -> None:
    with pytest.raises(UsageError) as err:
        build(Request(script="t.py", **{field: value}), parse_declared("1x8xH100"))
    assert value in str(err.value) and "fix:" in str(err.value)


def test_plan_for_4096_nodes_is_complete() -> None:
    plan = build(Request(script="t.py", nnodes="4096", master_addr="n0"),
                 parse_declared("4096x8xH100"))
    assert plan.world_size == 32768 and len(plan.commands) == 4096
    assert plan.nodes[-1].ranks[-1] == 32767


def test_declared_cpu_inventory_plans_one_process_per_declared_slot() -> None:
    """`--inventory 1x8xcpu` says 8 CPU slots: 8 processes (it planned 1, the 2-core default)."""
    plan = build(Request(script="t.py"), parse_declared("1x8xcpu"))
    assert (plan.nodes[0].nproc, plan.backend) == (8, "gloo")
    explicit = build(Request(script="t.py", nproc_per_node="2"), parse_declared("1x8xcpu"))
    assert explicit.nodes[0].nproc == 2
