"""Multi-node network preflight: the route to the master, the interface, loopback hostnames.

Three traps, each seen on real clusters and in containers:

* the interface that reaches the master is not the one gloo/NCCL would pick (gloo binds the
  address this node's hostname resolves to; multi-homed nodes resolve it to another network);
* this node's hostname resolves to a loopback address (Debian's ``127.0.1.1 <hostname>``,
  containers, network namespaces): gloo binds loopback and torchrun advertises the name, so
  the other nodes cannot connect (``Gloo connectFullMesh failed ... remote=[127.0.0.1]``);
* with c10d rendezvous torchrun hosts the store only if the endpoint matches the hostname's
  addresses, so on such nodes nobody hosts it.

The fix is decided here and applied by the launcher: ``--local-addr <reachable address>``,
``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` for the job, and ``--rdzv-conf is_host=1|0``.
The look-ups are injectable (:class:`NetView`) so the rules are tested with real data shapes.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from distrun.errors import DistrunError
from distrun.model.plan import Finding, LaunchPlan

IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def resolve(host: str) -> list[str]:
    """Addresses of ``host`` in getaddrinfo order (what gloo and torchrun see); [] if none."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return seen


def source_address(dest: str) -> str | None:
    """The local address the kernel uses to reach ``dest`` (UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in dest else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((dest, 9))
        except OSError:
            return None
        return str(sock.getsockname()[0])


def interface_addrs() -> dict[str, list[str]]:
    """Interface name -> its IPv4/IPv6 addresses, for interfaces that are up."""
    import psutil

    stats = psutil.net_if_stats()
    out: dict[str, list[str]] = {}
    for name, addrs in psutil.net_if_addrs().items():
        if name in stats and not stats[name].isup:
            continue
        out[name] = [a.address.split("%")[0] for a in addrs
                     if a.family in (socket.AF_INET, socket.AF_INET6)]
    return out


def default_route_interface(route_text: str) -> str | None:
    """The interface of the IPv4 default route in /proc/net/route text, if any."""
    for line in route_text.splitlines()[1:]:
        cols = line.split()
        if len(cols) > 2 and cols[1] == "00000000" and cols[0] != "lo":
            return cols[0]
    return None


def read_route_table() -> str:
    try:
        with open("/proc/net/route", encoding="ascii") as fh:
            return fh.read()
    except OSError:
        return ""


@dataclass(frozen=True)
class NetView:
    """What this node looks like on the network; every look-up swappable in tests."""

    hostname: Callable[[], str] = socket.gethostname
    resolve: Callable[[str], list[str]] = resolve
    source_address: Callable[[str], str | None] = source_address
    interfaces: Callable[[], dict[str, list[str]]] = interface_addrs
    route_table: Callable[[], str] = read_route_table


@dataclass(frozen=True)
class NetworkSetup:
    """The network facts of this node for one multi-node job, and what to change."""

    findings: list[Finding] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    local_addr: str | None = None
    hosts_store: bool | None = None
    master_ip: str | None = None
    interface: str | None = None


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def all_on_this_machine(plan: LaunchPlan) -> bool:
    """A literal loopback master (127.0.0.1, localhost): every node must be this machine."""
    return plan.master_addr == "localhost" or is_loopback(plan.master_addr)


def interface_of(addr: str, ifaces: Mapping[str, list[str]]) -> str | None:
    return next((name for name, addrs in ifaces.items() if addr in addrs), None)


def first_ipv4(ifaces: Mapping[str, list[str]], name: str) -> str | None:
    return next((a for a in ifaces.get(name, []) if "." in a), None)


def outward_interface(view: NetView, ifaces: Mapping[str, list[str]]) -> str | None:
    """This node's interface towards the others when the master is this node itself."""
    default = default_route_interface(view.route_table())
    if default in ifaces:
        return default
    usable = [n for n, addrs in ifaces.items()
              if any("." in a and not is_loopback(a) for a in addrs)]
    return usable[0] if len(usable) == 1 else None


def master_route(plan: LaunchPlan, view: NetView, ifaces: Mapping[str, list[str]]
                 ) -> tuple[str | None, str | None, list[Finding]]:
    """(master IP, this node's interface towards the job, findings)."""
    addrs = view.resolve(plan.master_addr)
    if not addrs:
        return None, None, []  # master_resolves (checks/host.py) reports it
    ip = next((a for a in addrs if "." in a), addrs[0])
    src = view.source_address(ip)
    if src is None:
        return ip, None, [Finding(
            id="master-no-route", severity="error",
            message=f"this node has no route to the master {plan.master_addr} ({ip})",
            fix=f"check --master-addr, and 'ip route get {ip}' on this node: the master must be "
                "on a network one of this node's interfaces reaches")]
    if not is_loopback(src):
        return ip, interface_of(src, ifaces), []
    # the master is this node, under a loopback address, or a name that resolves to one here
    # (Debian's 127.0.1.1: the other nodes resolve the same name to a reachable address)
    iface = outward_interface(view, ifaces)
    if all_on_this_machine(plan):
        return ip, iface, [Finding(
            id="master-loopback", severity="warning",
            message=f"master address {plan.master_addr} ({ip}) is a loopback address, but the job "
                    f"has {plan.nnodes} nodes: the other nodes cannot reach it unless they are "
                    "this machine",
            fix="pass --master-addr as the master's address on the network the nodes share")]
    return ip, iface, []


def ifname_findings(iface: str | None, ifaces: Mapping[str, list[str]],
                    env: Mapping[str, str]) -> list[Finding]:
    """A *_SOCKET_IFNAME the user set that names no interface here, or not the one to use."""
    out = []
    for var in IFNAME_VARS:
        value = env.get(var)
        if not value or value.startswith(("^", "=")) or "," in value:
            continue  # NCCL's exclude/exact/list syntax: left to the user
        if value not in ifaces:
            out.append(Finding(id="ifname-missing", severity="error",
                               message=f"{var}={value}, but this node has no interface {value} "
                                       f"(it has {', '.join(sorted(ifaces))})",
                               fix=f"set {var} to the interface that reaches the other nodes"
                                   f"{f' ({iface})' if iface else ''}, or unset it"))
        elif iface and value != iface:
            out.append(Finding(id="ifname-not-route", severity="warning",
                               message=f"{var}={value}, but the route to the master leaves "
                                       f"through {iface}",
                               fix=f"set {var}={iface}, unless {value} reaches the other nodes "
                                   "too"))
    return out


def hostname_findings(view: NetView, iface: str | None, ifaces: Mapping[str, list[str]]
                      ) -> tuple[list[Finding], bool]:
    """Findings about this node's hostname, and whether to pin the interface and address."""
    name = view.hostname()
    addrs = view.resolve(name)
    if not addrs:
        return [Finding(id="hostname-unresolvable", severity="warning",
                        message=f"this node's hostname {name!r} does not resolve: torchrun and "
                                "gloo advertise it to the other nodes",
                        fix="add it to /etc/hosts with this node's network address; distrun "
                            "passes --local-addr and GLOO_SOCKET_IFNAME for this job")], True
    if is_loopback(addrs[0]):
        return [Finding(id="hostname-loopback", severity="warning",
                        message=f"this node's hostname {name!r} resolves to {addrs[0]} "
                                "(loopback): gloo would bind it and torchrun would advertise it, "
                                "so the other nodes could not connect",
                        fix=f"map {name} to this node's network address in /etc/hosts; for this "
                            f"job distrun uses the address of {iface or 'the outward interface'}")
                ], True
    gloo_iface = interface_of(addrs[0], ifaces)
    if iface and gloo_iface and gloo_iface != iface:
        return [Finding(id="interface-mismatch", severity="warning",
                        message=f"hostname {name!r} resolves to {addrs[0]} on {gloo_iface}, which "
                                f"gloo would use, but the master is reached through {iface}",
                        fix=f"distrun sets GLOO_SOCKET_IFNAME={iface} for this job; set it "
                            "yourself for plain torchrun")], True
    return [], False


def network_setup(plan: LaunchPlan, env: Mapping[str, str], view: NetView | None = None
                  ) -> NetworkSetup:
    """Checks and fixes for this node in a multi-node job (none for a single node)."""
    if plan.nnodes < 2:
        return NetworkSetup()
    view = view or NetView()
    ifaces = view.interfaces()
    ip, iface, findings = master_route(plan, view, ifaces)
    if ip is None or all_on_this_machine(plan):
        # unresolvable (reported by checks/host.py), or every node on this machine: loopback is
        # then right, and torchrun's own guess of who hosts the store works
        return NetworkSetup(findings, master_ip=ip, interface=iface)
    findings += ifname_findings(iface, ifaces, env)
    name_findings, pin = hostname_findings(view, iface, ifaces)
    findings += name_findings
    local = is_loopback(ip) or ip in {a for addrs in ifaces.values() for a in addrs}
    hosts = local if plan.rdzv_backend != "static" else None
    setup_env: dict[str, str] = {}
    local_addr = None
    if pin and iface:
        local_addr = first_ipv4(ifaces, iface)
        setup_env = {var: iface for var in IFNAME_VARS if var not in env}
    elif pin:
        findings.append(Finding(id="interface-unknown", severity="error", status="unknown",
                                message="could not tell which interface reaches the other nodes "
                                        f"(interfaces: {', '.join(sorted(ifaces))})",
                                fix="set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to it and "
                                    "pass --local-addr with its address"))
    return NetworkSetup(findings, setup_env, local_addr, hosts, ip, iface)


class MasterUnreachable(DistrunError):
    """This node cannot open a TCP connection to the master's port."""


def _unreachable(host: str, port: int, what: str, fix: str) -> MasterUnreachable:
    return MasterUnreachable(f"cannot reach the master {host}:{port} from this node: {what}",
                             "the master node's distrun launch listening on that address and port",
                             fix)


WRONG_NET_FIX = ("check --master-addr/--master-port (or --rdzv-endpoint) on this node; likely "
                 "causes: a wrong address, a firewall dropping the port, or a master address on "
                 "a network this node's interface does not reach (try 'ip route get {host}')")


def probe_master(host: str, port: int, wait_s: float, connect_s: float = 5.0,
                 on_wait: Callable[[str], None] | None = None) -> socket.socket:
    """A TCP connection to the master's port, or MasterUnreachable within seconds.

    Refused means the master host answered but nothing listens yet (its launcher may still be
    starting): retried until ``wait_s``. Unreachable, timed out or unresolvable fail at once.
    """
    deadline = time.monotonic() + wait_s
    waited = False
    while True:
        try:
            return socket.create_connection((host, port), timeout=connect_s)
        except ConnectionRefusedError:
            if time.monotonic() + 0.5 > deadline:
                raise _unreachable(host, port, f"connection refused for {wait_s:.0f} s (the host "
                                   "answers, but nothing listens on that port)",
                                   "start distrun launch on the master node (node rank 0) with "
                                   "the same --master-port, check the port, or raise "
                                   "--master-wait") from None
            if on_wait and not waited:
                on_wait(f"waiting for the master {host}:{port} (connection refused: its distrun "
                        f"launch is not listening yet; up to {wait_s:.0f} s)")
            waited = True
            time.sleep(0.5)
        except socket.gaierror as exc:
            raise _unreachable(host, port, f"the name does not resolve ({exc.strerror})",
                               "pass the master's IP address, or fix /etc/hosts or DNS on this "
                               "node") from None
        except TimeoutError:
            raise _unreachable(host, port, f"no answer within {connect_s:.0f} s",
                               WRONG_NET_FIX.format(host=host)) from None
        except OSError as exc:
            raise _unreachable(host, port, f"{exc.strerror or exc}",
                               WRONG_NET_FIX.format(host=host)) from None
