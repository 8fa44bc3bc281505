from __future__ import annotations

import os
import socket
import subprocess

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.checks import host
from distrun.checks.host import HostContext
from distrun.plan import Request, build


def cpu_plan(**kw):  # type: ignore[no-untyped-def]
    return build(Request(script="t.py", **kw), parse_declared("1x2xcpu"))


def test_busy_master_port_is_an_error_with_a_free_alternative() -> None:
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        port = sock.getsockname()[1]
        plan = cpu_plan(master_port=port)
        (finding,) = host.master_port_free(plan, HostContext(0, {}))
    assert finding.id == "port-busy" and str(port) in finding.message
    assert "--master-port" in finding.fix


def test_free_master_port_passes_and_port_zero_is_not_checked() -> None:
    port = host.free_port()
    assert host.master_port_free(cpu_plan(master_port=port), HostContext(0, {})) == []
    assert host.master_port_free(cpu_plan(), HostContext(0, {})) == []


def test_port_is_only_checked_on_the_node_that_hosts_the_store() -> None:
    with socket.socket() as sock:
        sock.bind(("", 0))
        sock.listen()
        plan = build(Request(script="t.py", nnodes="2", node_rank=1, master_addr="10.0.0.1",
                             master_port=sock.getsockname()[1]), parse_declared("2x2xcpu"))
        assert host.master_port_free(plan, HostContext(1, {})) == []


def test_unresolvable_master(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dns(*args: object, **kw: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    plan = build(Request(script="t.py", nnodes="2", master_addr="worker-0.typo", master_port=29500),
                 parse_declared("2x2xcpu"))
    (finding,) = host.master_resolves(plan, HostContext(0, {}))
    assert finding.id == "master-unresolvable" and "worker-0.typo" in finding.message


def test_ip_master_is_not_looked_up() -> None:
    plan = build(Request(script="t.py", nnodes="2", master_addr="10.1.2.3", master_port=29500),
                 parse_declared("2x2xcpu"))
    assert host.master_resolves(plan, HostContext(0, {})) == []


def test_backend_extension_missing() -> None:
    plan = build(Request(script="t.py"), parse_declared("1x8xgcu"))
    (finding,) = host.backend_in_build(plan, HostContext(0, {}))
    assert finding.id == "backend-unavailable" and "torch_gcu" in finding.message


def test_nccl_missing_from_a_cpu_build() -> None:
    plan = build(Request(script="t.py"), parse_declared("1x8xH100"))
    (finding,) = host.backend_in_build(plan, HostContext(0, {}))
    assert finding.id == "backend-unavailable" and "nccl" in finding.message


def test_gloo_is_in_the_build_and_libuv_is_there() -> None:
    plan = cpu_plan()
    assert host.backend_in_build(plan, HostContext(0, {})) == []
    assert host.libuv_store(plan, HostContext(0, {})) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_small_shm_warns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    shm = tmp_path / "shm"
    shm.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(shm)], check=True)
    try:
        (finding,) = host.shm_size(cpu_plan(), HostContext(0, {}, shm_path=str(shm)))
    finally:
        subprocess.run(["umount", str(shm)], check=True)
    assert finding.id == "shm-small" and "64 MiB" in finding.message
    assert "--shm-size" in finding.fix


def test_missing_shm_is_unknown_not_a_pass(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (finding,) = host.shm_size(cpu_plan(), HostContext(0, {}, shm_path=str(tmp_path / "none")))
    assert finding.status == "unknown" and finding.severity == "warning"
