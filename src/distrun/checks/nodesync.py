"""Do the nodes agree? Python, torch, driver, code revision, node ranks and clocks.

Exchanged by the launchers themselves, before torchrun starts, on the master's own port (no
ssh, no second port to open in a firewall):

1. the master node (static rendezvous: node rank 0; c10d: the node that hosts the store)
   listens on the master port, which torchrun's store binds a moment later;
2. every other node connects (the connection is the TCP probe of ``network.probe_master``),
   sends one JSON line with its facts and waits for one JSON line back: the findings;
3. when the last node has joined, the master closes its listening socket *first*, then
   compares and answers. So a node that got its answer and started torchrun can only reach
   torchrun's store (its client retries "connection refused" until the store is up), never
   this exchange. The master waits at most ``--master-wait`` seconds for the nodes.

Both sides are bounded in time; a connection that does not speak this protocol within a few
seconds is dropped and does not count as a node.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import re
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distrun.accelerators.vendors import VENDORS
from distrun.errors import DistrunError
from distrun.model.plan import Finding, Severity

PROTOCOL = "distrun-node-sync/1"
CLOCK_SKEW_S = 5.0
LINE_MAX = 64 * 1024
READ_S = 5.0
ERROR_KEYS = ("torch", "python_minor")
WARNING_KEYS = ("python", "distrun", "driver", "git")
DRIVER_FILES = {v.id.value: v.driver_file for v in VENDORS.values() if v.driver_file}


class NodesMissing(DistrunError):
    """Not every node joined the master within the wait."""


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def driver_version(vendor: str) -> str | None:
    """The kernel driver's version, read from its file (no device library is initialised)."""
    path = DRIVER_FILES.get(vendor)
    try:
        with open(path or "", encoding="utf-8", errors="replace") as fh:
            text = fh.read(4096)
    except OSError:
        return None
    found = re.search(r"Kernel Module\s+(\S+)", text)
    return found.group(1) if found else text.strip().splitlines()[0] if text.strip() else None


def git_revision(directory: str) -> str | None:
    """``<sha>`` of the repository holding the training script, ``+dirty`` with local edits."""
    try:
        sha = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", directory, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def local_facts(script: str | None, node_rank: int | None, vendor: str) -> dict[str, Any]:
    from distrun import __version__

    directory = os.path.dirname(os.path.abspath(script)) if script else os.getcwd()
    python = platform.python_version()
    return {
        "host": socket.gethostname(),
        "node_rank": node_rank,
        "python": python,
        "python_minor": ".".join(python.split(".")[:2]),
        "torch": package_version("torch"),
        "distrun": __version__,
        "driver": driver_version(vendor),
        "git": git_revision(directory),
    }


def label(facts: dict[str, Any]) -> str:
    rank = facts.get("node_rank")
    return f"{facts.get('host')}" + (f" (node {rank})" if rank is not None else "")


def disagreement(key: str, nodes: Sequence[dict[str, Any]]) -> Finding | None:
    values = {str(n.get(key)) for n in nodes}
    if len(values) < 2:
        return None
    severity: Severity = "error" if key in ERROR_KEYS else "warning"
    shown = "python" if key == "python_minor" else key
    seen = ", ".join(f"{label(n)}: {n.get(shown)}" for n in nodes)
    return Finding(id=f"nodes-differ-{shown}", severity=severity,
                   message=f"the nodes run different {shown} versions ({seen})",
                   fix=f"install the same {shown} on every node (one container image or "
                       "environment for the job)" if shown != "git" else
                       "check out the same revision of the code on every node (or share it)")


def duplicate_ranks(nodes: Sequence[dict[str, Any]]) -> list[Finding]:
    seen: dict[int, str] = {}
    out = []
    for n in nodes:
        rank = n.get("node_rank")
        if rank is None:
            continue
        if rank in seen:
            out.append(Finding(id="node-rank-duplicate", severity="error",
                               message=f"{seen[rank]} and {label(n)} both have --node-rank {rank}",
                               fix="give every node its own --node-rank, 0 to nnodes-1"))
        seen[rank] = label(n)
    return out


def clock_findings(nodes: Sequence[dict[str, Any]], skew_s: Sequence[float]) -> list[Finding]:
    out = []
    for n, skew in zip(nodes, skew_s, strict=True):
        if abs(skew) > CLOCK_SKEW_S:
            out.append(Finding(id="clock-skew", severity="warning",
                               message=f"{label(n)}'s clock is {skew:+.1f} s off the master's "
                                       f"(more than {CLOCK_SKEW_S:.0f} s): log times and "
                                       "timeouts across nodes will not line up",
                               fix="run NTP (chrony or systemd-timesyncd) on every node"))
    return out


def compare(master: dict[str, Any], peers: Sequence[dict[str, Any]],
            skew_s: Sequence[float]) -> list[Finding]:
    """Findings over every node's facts; ``skew_s[i]``: peer i's clock minus the master's."""
    nodes = [master, *peers]
    found = [disagreement(k, nodes) for k in (*ERROR_KEYS, *WARNING_KEYS)]
    out = [f for f in found if f is not None]
    if any(f.id == "nodes-differ-python" and f.severity == "error" for f in out):
        out = [f for f in out if not (f.id == "nodes-differ-python" and f.severity == "warning")]
    return [*duplicate_ranks(nodes), *out, *clock_findings(peers, skew_s)]


def send_line(conn: socket.socket, data: dict[str, Any]) -> None:
    conn.sendall((json.dumps(data) + "\n").encode())


def read_line(conn: socket.socket, timeout: float) -> dict[str, Any] | None:
    """One JSON object line, or None (timeout, EOF, too long, not JSON, not ours)."""
    conn.settimeout(timeout)
    buf = b""
    try:
        while b"\n" not in buf and len(buf) < LINE_MAX:
            chunk = conn.recv(4096)
            if not chunk:
                return None
            buf += chunk
        data = json.loads(buf.split(b"\n", 1)[0])
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("protocol") == PROTOCOL else None


@dataclass
class Joined:
    conn: socket.socket
    facts: dict[str, Any]
    skew_s: float


def listen(port: int) -> socket.socket:
    if socket.has_dualstack_ipv6():
        return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
    return socket.create_server(("", port))


def accept_one(listener: socket.socket, clock: Callable[[], float]) -> Joined | None:
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        return None
    data = read_line(conn, READ_S)
    if data is None or not isinstance(data.get("facts"), dict):
        conn.close()
        return None
    return Joined(conn, data["facts"], float(data.get("time", 0.0)) - clock())


def gather(listener: socket.socket, expected: int, wait_s: float,
           clock: Callable[[], float]) -> list[Joined]:
    listener.settimeout(0.5)
    deadline = time.monotonic() + wait_s
    joined: list[Joined] = []
    while len(joined) < expected:
        if time.monotonic() > deadline:
            for j in joined:
                j.conn.close()
            names = ", ".join(label(j.facts) for j in joined) or "none"
            raise NodesMissing(
                f"{len(joined)} of {expected} other node(s) joined the master within "
                f"{wait_s:.0f} s (joined: {names})",
                "distrun launch on every node with the same --nnodes and master address/port",
                "start the missing nodes (in a Slurm allocation: srun --ntasks-per-node=1 "
                "distrun launch ...), or raise --master-wait")
        one = accept_one(listener, clock)
        if one is not None:
            joined.append(one)
    return joined


def serve(port: int, expected: int, facts: dict[str, Any], wait_s: float,
          clock: Callable[[], float] = time.time) -> list[Finding]:
    """The master's side: gather ``expected`` nodes, close the port, answer, return findings."""
    try:
        listener = listen(port)
    except OSError as exc:
        raise DistrunError(f"cannot listen on the master port {port}: {exc.strerror}",
                           "a free port", "pass a free --master-port on every node") from None
    try:
        joined = gather(listener, expected, wait_s, clock)
    finally:
        listener.close()
    findings = compare(facts, [j.facts for j in joined], [j.skew_s for j in joined])
    answer = {"protocol": PROTOCOL, "findings": [f.model_dump() for f in findings]}
    for j in joined:
        with contextlib.suppress(OSError):  # that node gave up waiting; it reports its error
            send_line(j.conn, answer)
    for j in joined:  # let the node close first: the TIME_WAIT stays on its side, not the port
        read_line(j.conn, 2.0)
        j.conn.close()
    return findings


def join(conn: socket.socket, facts: dict[str, Any], wait_s: float, where: str,
         clock: Callable[[], float] = time.time) -> list[Finding]:
    """A node's side, on a connection to the master: send the facts, return the findings."""
    with conn:
        send_line(conn, {"protocol": PROTOCOL, "facts": facts, "time": clock()})
        answer = read_line(conn, wait_s)
    if answer is None or not isinstance(answer.get("findings"), list):
        raise NodesMissing(
            f"the master {where} accepted the connection but gave no preflight answer within "
            f"{wait_s:.0f} s",
            "distrun launch on the master node, answering once every node joined",
            "see the master's output (its preflight may have failed, or other nodes are "
            "missing); plain torchrun on the master does not answer: use distrun launch there")
    return [Finding(**f) for f in answer["findings"]]
