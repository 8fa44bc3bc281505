"""Multi-node network checks and the node exchange: fake look-ups, real loopback sockets."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.checks.network import (
    MasterUnreachable,
    NetView,
    default_route_interface,
    network_setup,
    probe_master,
)
from distrun.checks.nodesync import NodesMissing, compare, join, serve
from distrun.model.plan import LaunchPlan
from distrun.plan import Request, build

# psutil.net_if_addrs shapes, reduced to names and addresses (see checks.network.interface_addrs)
IFACES = {"lo": ["127.0.0.1", "::1"], "eth0": ["10.201.0.2"], "ib0": ["192.168.7.2"]}
# /proc/net/route of a node whose default route leaves through eth0
ROUTES = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
          "eth0\t00000000\t0100C90A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
          "eth0\t0000C90A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")


def plan(master: str = "10.201.0.1", nnodes: int = 2, c10d: bool = False) -> LaunchPlan:
    req = (Request(script="t.py", nnodes=str(nnodes), rdzv_endpoint=f"{master}:29400")
           if c10d else Request(script="t.py", nnodes=str(nnodes), node_rank=1,
                                master_addr=master, master_port=29500))
    return build(req, parse_declared("1x2xcpu"))


def view(hostname: str = "n1", names: dict[str, list[str]] | None = None,
         route: dict[str, str | None] | None = None, ifaces: dict[str, list[str]] = IFACES,
         routes: str = ROUTES) -> NetView:
    table = {"n1": ["10.201.0.2"], "n0": ["10.201.0.1"], "10.201.0.1": ["10.201.0.1"],
             **(names or {})}
    to = {"10.201.0.1": "10.201.0.2", **(route or {})}
    return NetView(hostname=lambda: hostname, resolve=lambda h: table.get(h, [h]),
                   source_address=lambda ip: to.get(ip, "127.0.0.1"),
                   interfaces=lambda: ifaces, route_table=lambda: routes)


def ids(findings: list[Any]) -> dict[str, str]:
    return {f.id: f.severity for f in findings}


def test_healthy_node_needs_no_change() -> None:
    setup = network_setup(plan(), {}, view())
    assert setup.findings == [] and setup.env == {} and setup.local_addr is None
    assert setup.interface == "eth0" and setup.master_ip == "10.201.0.1"


def test_single_node_is_not_checked() -> None:
    assert network_setup(plan(nnodes=1), {}, view(hostname="x")).findings == []


def test_debian_loopback_hostname_pins_interface_and_address() -> None:
    setup = network_setup(plan(), {}, view(names={"n1": ["127.0.1.1"]}))
    assert ids(setup.findings) == {"hostname-loopback": "warning"}
    assert "'n1' resolves to 127.0.1.1 (loopback)" in setup.findings[0].message
    assert setup.env == {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"}
    assert setup.local_addr == "10.201.0.2"


def test_user_ifname_is_kept() -> None:
    setup = network_setup(plan(), {"GLOO_SOCKET_IFNAME": "eth0"},
                          view(names={"n1": ["127.0.1.1"]}))
    assert setup.env == {"NCCL_SOCKET_IFNAME": "eth0"}


def test_master_node_with_loopback_name_uses_default_route_interface() -> None:
    # node 0 of a Slurm job: master 'n0' is itself, and Debian maps n0 to 127.0.1.1 here
    names = {"n0": ["127.0.1.1"]}
    setup = network_setup(plan(master="n0", c10d=True), {}, view(
        hostname="n0", names=names, route={"127.0.1.1": "127.0.0.1"}))
    assert ids(setup.findings) == {"hostname-loopback": "warning"}
    assert setup.interface == "eth0" and setup.local_addr == "10.201.0.2"  # default route's
    assert setup.env["GLOO_SOCKET_IFNAME"] == "eth0" and setup.hosts_store is True
    ifaces = {"lo": ["127.0.0.1"], "eth0": ["10.201.0.1"]}
    setup = network_setup(plan(master="n0"), {}, view(
        hostname="n0", names={"n0": ["10.201.0.1"], "n0.local": ["127.0.1.1"]},
        route={"10.201.0.1": "10.201.0.1"}, ifaces=ifaces))
    assert setup.findings == [] and setup.interface == "eth0"


def test_hostname_on_another_network_than_the_master() -> None:
    setup = network_setup(plan(), {}, view(names={"n1": ["192.168.7.2"]}))
    assert ids(setup.findings) == {"interface-mismatch": "warning"}
    assert "192.168.7.2 on ib0" in setup.findings[0].message
    assert setup.env["GLOO_SOCKET_IFNAME"] == "eth0"


def test_literal_loopback_master_means_one_machine() -> None:
    setup = network_setup(plan(master="127.0.0.1"), {}, view(
        hostname="vm", names={"vm": ["127.0.0.1"]}, route={"127.0.0.1": "127.0.0.1"}))
    assert ids(setup.findings) == {"master-loopback": "warning"}
    assert setup.env == {} and setup.local_addr is None  # loopback is right there


def test_ifname_naming_no_interface_is_an_error() -> None:
    setup = network_setup(plan(), {"NCCL_SOCKET_IFNAME": "ens5"}, view())
    assert ids(setup.findings) == {"ifname-missing": "error"}
    assert "NCCL_SOCKET_IFNAME=ens5" in setup.findings[0].message
    assert "(eth0)" in setup.findings[0].fix


def test_ifname_not_on_the_route_warns() -> None:
    setup = network_setup(plan(), {"GLOO_SOCKET_IFNAME": "ib0"}, view())
    assert ids(setup.findings) == {"ifname-not-route": "warning"}


def test_no_route_to_master_is_an_error() -> None:
    broken = NetView(hostname=lambda: "n1", resolve=lambda h: ["10.9.9.9"],
                     source_address=lambda ip: None, interfaces=lambda: IFACES,
                     route_table=lambda: ROUTES)
    setup = network_setup(plan(master="10.9.9.9"), {}, broken)
    assert ids(setup.findings) == {"master-no-route": "error"}
    assert "ip route get 10.9.9.9" in setup.findings[0].fix


def test_c10d_host_is_the_node_owning_the_endpoint_address() -> None:
    owner = {"lo": ["127.0.0.1"], "eth0": ["10.201.0.1"]}
    assert network_setup(plan(c10d=True), {}, view(
        hostname="n0", route={"10.201.0.1": "10.201.0.1"}, ifaces=owner)).hosts_store is True
    assert network_setup(plan(c10d=True), {}, view()).hosts_store is False
    assert network_setup(plan(), {}, view()).hosts_store is None  # static: node rank 0 hosts


def test_default_route_interface() -> None:
    assert default_route_interface(ROUTES) == "eth0"
    assert default_route_interface(ROUTES.splitlines()[0]) is None


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_probe_refused_waits_then_names_host_and_port() -> None:
    port = closed_port()
    said: list[str] = []
    started = time.monotonic()
    with pytest.raises(MasterUnreachable) as exc:
        probe_master("127.0.0.1", port, wait_s=1.0, on_wait=said.append)
    assert time.monotonic() - started < 3
    assert f"cannot reach the master 127.0.0.1:{port}" in str(exc.value)
    assert "connection refused" in str(exc.value) and "--master-wait" in str(exc.value)
    assert len(said) == 1 and "not listening yet" in said[0]


def test_probe_unresolvable_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_name(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_name)
    started = time.monotonic()
    with pytest.raises(MasterUnreachable, match=r"master-typo:29500 .*does not resolve"):
        probe_master("master-typo", 29500, wait_s=30)
    assert time.monotonic() - started < 1


FACTS = {"host": "n0", "node_rank": 0, "python": "3.11.7", "python_minor": "3.11",
         "torch": "2.13.0", "distrun": "0.1.0", "driver": None, "git": "abc"}


def test_compare_agreeing_nodes() -> None:
    assert compare(FACTS, [{**FACTS, "host": "n1", "node_rank": 1}], [0.2]) == []


def test_compare_reports_each_disagreement() -> None:
    peer = {**FACTS, "host": "n1", "node_rank": 0, "torch": "2.12.1", "python": "3.11.9",
            "git": "def+dirty"}
    found = compare(FACTS, [peer], [-42.0])
    assert ids(found) == {"node-rank-duplicate": "error", "nodes-differ-torch": "error",
                          "nodes-differ-python": "warning", "nodes-differ-git": "warning",
                          "clock-skew": "warning"}
    by_id = {f.id: f for f in found}
    assert "n0 (node 0): 2.13.0, n1 (node 0): 2.12.1" in by_id["nodes-differ-torch"].message
    assert "-42.0 s" in by_id["clock-skew"].message
    assert "n0 (node 0) and n1 (node 0) both have --node-rank 0" in by_id[
        "node-rank-duplicate"].message


def test_python_minor_mismatch_is_one_error() -> None:
    found = compare(FACTS, [{**FACTS, "node_rank": 1, "python": "3.10.4", "python_minor": "3.10"}],
                    [0.0])
    assert ids(found) == {"nodes-differ-python": "error"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def test_exchange_over_loopback_gives_every_node_the_same_findings() -> None:
    port = free_port()
    result: dict[str, Any] = {}
    master = threading.Thread(target=lambda: result.update(
        master=serve(port, 2, FACTS, wait_s=20)))
    master.start()
    # a stray client that does not speak the protocol must not count as a node
    stray = probe_master("127.0.0.1", port, wait_s=10)
    stray.sendall(b"\x00\x01garbage\n")

    def node(rank: int, skew: float) -> None:
        facts = {**FACTS, "host": f"n{rank}", "node_rank": rank}
        conn = probe_master("127.0.0.1", port, wait_s=10)
        result[f"n{rank}"] = join(conn, facts, 20, "127.0.0.1", clock=lambda: time.time() + skew)

    peers = [threading.Thread(target=node, args=args) for args in ((1, 0.0), (2, 30.0))]
    for t in peers:
        t.start()
    for t in (master, *peers):
        t.join(timeout=30)
    stray.close()
    assert ids(result["master"]) == {"clock-skew": "warning"}
    assert "n2 (node 2)'s clock is +30" in result["master"][0].message
    assert result["n1"] == result["n2"] == result["master"]
    with socket.socket() as again:  # the port is free for torchrun's store right away
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("", port))


def test_master_gives_up_naming_the_missing_nodes() -> None:
    port = free_port()
    with pytest.raises(NodesMissing, match=r"0 of 1 other node\(s\) joined the master within 1 s"):
        serve(port, 1, FACTS, wait_s=1.0)
