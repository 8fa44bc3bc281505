"""Preflight rules that look at this host: ports, names, the torch build, /dev/shm.

Each rule returns findings; a rule that cannot run returns an ``unknown`` finding with the
reason, never an empty list that would read as a pass.
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from distrun.accelerators.vendors import VENDORS, VendorId
from distrun.model.plan import Finding, LaunchPlan

SHM_MIN_BYTES = 1 << 30
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


@dataclass(frozen=True)
class HostContext:
    """Where the checks run: this node's rank in the plan and the environment to read."""

    node_rank: int
    env: Mapping[str, str]
    shm_path: str = "/dev/shm"


HostRule = Callable[[LaunchPlan, HostContext], list[Finding]]


def unknown(check: str, why: str, fix: str = "") -> Finding:
    return Finding(id=f"{check}-unknown", severity="warning", status="unknown",
                   message=f"could not check {check}: {why}", fix=fix)


def hosts_store(plan: LaunchPlan, ctx: HostContext) -> bool:
    """True when this node's agent will open the rendezvous store (so its port must be free)."""
    if plan.master_port == 0:
        return False
    if plan.rdzv_backend == "static":
        return ctx.node_rank == 0
    return plan.master_addr in LOCAL_NAMES or plan.master_addr == socket.gethostname()


def master_port_free(plan: LaunchPlan, ctx: HostContext) -> list[Finding]:
    if not hosts_store(plan, ctx):
        return []
    if not 0 < plan.master_port <= 65535:
        return [Finding(id="port-invalid", severity="error",
                        message=f"master port {plan.master_port} is not a TCP port",
                        fix="pass --master-port between 1 and 65535 (e.g. 29500)")]
    try:
        port_in_use(plan.master_port)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return [unknown("master-port", f"binding port {plan.master_port}: {exc}")]
        free = free_port()
        return [Finding(
            id="port-busy",
            severity="error",
            message=f"master port {plan.master_port} is already in use on this host"
                    f"{owner_of(plan.master_port)}",
            fix=f"pass a free port, e.g. --master-port {free}, or stop the process holding it",
        )]
    return []


def port_in_use(port: int) -> None:
    """Bind as TCPStore does (all interfaces, SO_REUSEADDR); OSError when taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("", port))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def owner_of(port: int) -> str:
    try:
        import psutil

        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == "LISTEN" and conn.pid:
                proc = psutil.Process(conn.pid)
                return f" (held by pid {conn.pid}, {proc.name()})"
    except Exception:  # the owner is a courtesy; the finding stands without it
        return ""
    return ""


def master_resolves(plan: LaunchPlan, ctx: HostContext) -> list[Finding]:
    addr = plan.master_addr
    if addr in LOCAL_NAMES or _is_ip(addr):
        return []
    try:
        socket.getaddrinfo(addr, plan.master_port or None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return [Finding(id="master-unresolvable", severity="error",
                        message=f"master address {addr!r} does not resolve on this host ({exc})",
                        fix="pass --master-addr as an IP address or a name this node resolves "
                            "(check /etc/hosts and DNS)")]
    return []


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def backend_in_build(plan: LaunchPlan, ctx: HostContext) -> list[Finding]:
    vendor = VENDORS[VendorId(plan.vendor)]
    if vendor.module and plan.backend in vendor.backends:
        if importlib.util.find_spec(vendor.module) is None:
            return [Finding(id="backend-unavailable", severity="error",
                            message=f"backend {plan.backend} needs the {vendor.module} package, "
                                    "which is not installed",
                            fix=f"install {vendor.label}'s {vendor.module} for this torch")]
        return []
    try:
        import torch.distributed as dist
    except ImportError as exc:
        return [unknown("backend", f"torch is not importable ({exc})",
                        "pip install 'distrun[torch]'")]
    if dist.is_available() and dist.is_backend_available(plan.backend):
        return []
    return [Finding(id="backend-unavailable", severity="error",
                    message=f"this torch build has no {plan.backend} backend",
                    fix=f"use --backend gloo, or install a torch build with {plan.backend}")]


def libuv_store(plan: LaunchPlan, ctx: HostContext) -> list[Finding]:
    if ctx.env.get("USE_LIBUV") == "0":
        return []
    try:
        import torch.distributed as dist

        store = dist.TCPStore  # type: ignore[attr-defined]
        store("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=True)
    except ImportError as exc:
        return [unknown("libuv", f"torch is not importable ({exc})")]
    except RuntimeError as exc:
        if "libuv" not in str(exc):
            return [unknown("libuv", str(exc).splitlines()[0])]
        return [Finding(id="libuv-missing", severity="warning",
                        message="this torch build has no libuv, and torchrun's store asks for it",
                        fix="distrun sets USE_LIBUV=0 for the job; set it yourself for plain "
                            "torchrun")]
    return []


def shm_bytes(path: str) -> int:
    """The size of the file system at ``path`` (OSError when there is none)."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


def shm_size(plan: LaunchPlan, ctx: HostContext) -> list[Finding]:
    try:
        size = shm_bytes(ctx.shm_path)
    except OSError as exc:
        return [unknown("shm", f"{ctx.shm_path}: {exc.strerror}")]
    if size >= SHM_MIN_BYTES:
        return []
    return [Finding(
        id="shm-small",
        severity="warning",
        message=f"{ctx.shm_path} is {size / 2**20:.0f} MiB; DataLoader workers and NCCL need "
                "more ('Bus error' / 'unable to write to file </torch_...>')",
        fix="in Docker pass --shm-size=16g or --ipc=host; in Kubernetes mount an emptyDir "
            "with medium: Memory at /dev/shm",
    )]


RULES: tuple[HostRule, ...] = (
    master_port_free,
    master_resolves,
    backend_in_build,
    libuv_store,
    shm_size,
)


def host_findings(plan: LaunchPlan, ctx: HostContext) -> list[Finding]:
    return [f for rule in RULES for f in rule(plan, ctx)]
