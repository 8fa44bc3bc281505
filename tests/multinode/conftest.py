"""Two "hosts" made of network namespaces on a bridge, for real multi-node launches.

Recipe: /work/shared/testbed/netns.sh (its README explains every choice). Own names so nothing
clashes with the test bed or other suites: namespaces ``drt-n0``/``drt-n1``, bridge ``drt-br0``,
subnet 10.201.0.0/24 (node i has 10.201.0.<i+1> on ``eth0``), no default route, a resolv.conf
without nameserver (no look-up leaves the namespace). Each process started on node i also gets
its own UTS namespace with hostname ``n<i>``.

``hosts_style`` (indirect parameter) picks each node's /etc/hosts:
* ``"debian"`` (default): the node's own name maps to 127.0.1.1, as Debian's installer writes
  it; the other node's name maps to its address. Plain torchrun fails here (gloo binds
  loopback); distrun must detect it and pin the interface.
* ``"plain"``: every name maps to its node's address.

Teardown runs even when the test fails: every process living in the namespaces is killed by
PID (``ip netns pids``), then links, namespaces and /etc/netns/drt-n* are removed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PREFIX = "drt"
SUBNET = "10.201.0"
BRIDGE = f"{PREFIX}-br0"
NODES = 2


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


def ns_name(i: int) -> str:
    return f"{PREFIX}-n{i}"


def addr(i: int) -> str:
    return f"{SUBNET}.{i + 1}"


def hosts_text(i: int, style: str) -> str:
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    for n in range(NODES):
        own = style == "debian" and n == i
        lines.append(f"{'127.0.1.1' if own else addr(n)} n{n}")
    return "\n".join(lines) + "\n"


def ns_pids(name: str) -> list[int]:
    out = _ip("netns", "pids", name, check=False).stdout
    return [int(p) for p in out.split()]


def kill_namespace_processes(name: str) -> list[int]:
    killed: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = ns_pids(name)
        for pid in pids:
            try:
                os.kill(pid, sig)
                killed.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while ns_pids(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not ns_pids(name):
            break
    return killed


def teardown() -> None:
    for i in range(NODES):
        name = ns_name(i)
        if Path(f"/run/netns/{name}").exists():
            kill_namespace_processes(name)
        _ip("link", "del", f"{name}-h", check=False)
        _ip("netns", "del", name, check=False)
        shutil.rmtree(f"/etc/netns/{name}", ignore_errors=True)
    _ip("link", "del", BRIDGE, check=False)


def setup(style: str) -> None:
    teardown()
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("link", "set", BRIDGE, "up")
    for i in range(NODES):
        name, veth = ns_name(i), f"{ns_name(i)}-h"
        _ip("netns", "add", name)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("link", "set", veth, "master", BRIDGE, "up")
        _ip("-n", name, "addr", "add", f"{addr(i)}/24", "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")
        _ip("-n", name, "link", "set", "lo", "up")
        etc = Path(f"/etc/netns/{name}")
        etc.mkdir(parents=True, exist_ok=True)
        (etc / "hosts").write_text(hosts_text(i, style), encoding="utf-8")
        (etc / "resolv.conf").write_text("# distrun test bed: no DNS\noptions timeout:1 "
                                         "attempts:1\n", encoding="utf-8")


def wait_reachable(i: int, timeout: float = 10) -> None:
    """n0 -> node i: 'connection refused' on a closed port proves the path works."""
    probe = f"exec 3<>/dev/tcp/{addr(i)}/9"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["ip", "netns", "exec", ns_name(0), "timeout", "2", "bash", "-c",
                              probe], capture_output=True, text=True, timeout=10, check=False)
        if "refused" in out.stderr:
            return
        time.sleep(0.3)
    raise RuntimeError(f"test bed: n0 cannot reach {addr(i)}")


def why_unusable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "unshare", "bash", "timeout"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install iproute2 util-linux coreutils)"
    probe = f"{PREFIX}-probe"
    made = _ip("netns", "add", probe, check=False)
    _ip("netns", "del", probe, check=False)
    if made.returncode != 0:
        return f"'ip netns add' does not work here: {made.stderr.strip()}"
    return None


@dataclass
class NetnsCluster:
    """The namespaces, and a way to start a process 'on node i' that teardown will end."""

    style: str
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def addr(self, i: int) -> str:
        return addr(i)

    def start(self, i: int, argv: list[str], env: dict[str, str], cwd: Path
              ) -> subprocess.Popen[str]:
        wrapped = ["ip", "netns", "exec", ns_name(i), "unshare", "--uts", "--", "sh", "-c",
                   'hostname "$0" && exec "$@"', f"n{i}", *argv]
        proc = subprocess.Popen(wrapped, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc


@pytest.fixture
def netns_cluster(request: pytest.FixtureRequest) -> Iterator[NetnsCluster]:
    reason = why_unusable()
    if reason:
        pytest.skip(reason)
    cluster = NetnsCluster(getattr(request, "param", "debian"))
    try:
        setup(cluster.style)
        for i in range(1, NODES):
            wait_reachable(i)
        yield cluster
    finally:
        for proc in cluster.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        teardown()
