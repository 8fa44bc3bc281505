"""Do the nodes agree? Python, torch, driver, code revision, node ranks, sizes and clocks.

Exchanged by the launchers themselves, before torchrun starts, on the master's own port (no
ssh, no second port to open in a firewall):

1. the master node (static rendezvous: node rank 0; c10d: the node that hosts the store)
   listens on the master port, which torchrun's store binds a moment later, on the address
   of the master (:func:`bind_address`: the master address's interface, loopback for a
   loopback master; never every interface when the address is known);
2. every other node connects (the connection is the TCP probe of ``network.probe_master``),
   sends one line with its facts and waits for one line back: the findings. Both lines are
   validated and signed (``distrun.checks.nodewire``: HMAC-SHA256 under ``DISTRUN_JOB_TOKEN``);
3. when the last node has joined, the master closes its listening socket *first*, then
   compares and answers. So a node that got its answer and started torchrun can only reach
   torchrun's store (its client retries "connection refused" until the store is up), never
   this exchange. The master waits at most ``--master-wait`` seconds for the nodes.

Every connection is handled on its own thread with its own deadline (:data:`READ_S` in total,
never past the master's), so a slow or hostile peer neither blocks the others nor holds the
master past ``--master-wait``; a malformed, unsigned or wrongly signed message is refused with
one line (sent back to that peer, and named if the master gives up), and does not count.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import ipaddress
import os
import platform
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from distrun.accelerators.vendors import VENDORS
from distrun.checks.network import NetworkSetup, all_on_this_machine, is_loopback
from distrun.checks.nodewire import (
    ANSWER_LINE_MAX,
    PEER_LINE_MAX,
    Answer,
    Hello,
    JobKey,
    NodeFacts,
    Refused,
    decode,
    encode,
    new_nonce,
    read_line,
    send,
)
from distrun.errors import DistrunError
from distrun.model.plan import Finding, LaunchPlan, Severity

CLOCK_SKEW_S = 5.0
READ_S = 5.0
PENDING_MAX = 64
ERROR_KEYS = ("torch", "python_minor")
WARNING_KEYS = ("python", "distrun", "driver", "git")
DRIVER_FILES = {v.id.value: v.driver_file for v in VENDORS.values() if v.driver_file}

__all__ = ["NodeFacts", "NodesMissing", "bind_address", "compare", "join", "local_facts",
           "serve"]


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


def local_facts(script: str | None, node_rank: int | None, vendor: str,
                plan: LaunchPlan | None = None) -> NodeFacts:
    """This node's facts; with ``plan``, the sizes it plans (processes per node, nodes, world)."""
    from distrun import __version__

    directory = os.path.dirname(os.path.abspath(script)) if script else os.getcwd()
    python = platform.python_version()
    sizes = ({"nproc_per_node": plan.nproc_per_node, "nnodes": plan.nnodes,
              "world_size": plan.world_size} if plan is not None else {})
    return NodeFacts(host=socket.gethostname()[:256], node_rank=node_rank, python=python,
                     python_minor=".".join(python.split(".")[:2]),
                     torch=package_version("torch"), distrun=__version__,
                     driver=(driver_version(vendor) or "")[:256] or None,
                     git=git_revision(directory), **sizes)


def label(facts: NodeFacts) -> str:
    rank = facts.node_rank
    return facts.host + (f" (node {rank})" if rank is not None else "")


def disagreement(key: str, nodes: Sequence[NodeFacts]) -> Finding | None:
    values = {str(getattr(n, key)) for n in nodes}
    if len(values) < 2:
        return None
    severity: Severity = "error" if key in ERROR_KEYS else "warning"
    shown = "python" if key == "python_minor" else key
    seen = ", ".join(f"{label(n)}: {getattr(n, shown)}" for n in nodes)
    return Finding(id=f"nodes-differ-{shown}", severity=severity,
                   message=f"the nodes run different {shown} versions ({seen})",
                   fix=f"install the same {shown} on every node (one container image or "
                       "environment for the job)" if shown != "git" else
                       "check out the same revision of the code on every node (or share it)")


SIZES = (("nproc_per_node", "nproc", "{} process(es) per node", "--nproc-per-node"),
         ("nnodes", "nnodes", "{} node(s)", "--nnodes"),
         ("world_size", "world-size", "a world of {} rank(s)", "--nnodes and --nproc-per-node"))


def size_disagreement(nodes: Sequence[NodeFacts]) -> Finding | None:
    """The first size two nodes plan differently, naming both values (an error)."""
    for key, short, shape, flag in SIZES:
        known = [n for n in nodes if getattr(n, key) is not None]
        other = next((n for n in known if getattr(n, key) != getattr(known[0], key)), None)
        if other is None:
            continue
        first = known[0]
        return Finding(
            id=f"nodes-differ-{short}", severity="error",
            message=f"{label(first)} plans {shape.format(getattr(first, key))}, {label(other)} "
                    f"plans {getattr(other, key)}: torchrun would start a world of the wrong "
                    "size",
            fix=f"pass the same {flag} on every node")
    return None


def duplicate_ranks(nodes: Sequence[NodeFacts]) -> list[Finding]:
    seen: dict[int, str] = {}
    out = []
    for n in nodes:
        rank = n.node_rank
        if rank is None:
            continue
        if rank in seen:
            out.append(Finding(id="node-rank-duplicate", severity="error",
                               message=f"{seen[rank]} and {label(n)} both have --node-rank {rank}",
                               fix="give every node its own --node-rank, 0 to nnodes-1"))
        seen[rank] = label(n)
    return out


def clock_findings(nodes: Sequence[NodeFacts], skew_s: Sequence[float]) -> list[Finding]:
    out = []
    for n, skew in zip(nodes, skew_s, strict=True):
        if abs(skew) > CLOCK_SKEW_S:
            out.append(Finding(id="clock-skew", severity="warning",
                               message=f"{label(n)}'s clock is {skew:+.1f} s off the master's "
                                       f"(more than {CLOCK_SKEW_S:.0f} s): log times and "
                                       "timeouts across nodes will not line up",
                               fix="run NTP (chrony or systemd-timesyncd) on every node"))
    return out


def compare(master: NodeFacts, peers: Sequence[NodeFacts],
            skew_s: Sequence[float]) -> list[Finding]:
    """Findings over every node's facts; ``skew_s[i]``: peer i's clock minus the master's."""
    nodes = [master, *peers]
    found = [size_disagreement(nodes), *(disagreement(k, nodes) for k in
                                         (*ERROR_KEYS, *WARNING_KEYS))]
    out = [f for f in found if f is not None]
    if any(f.id == "nodes-differ-python" and f.severity == "error" for f in out):
        out = [f for f in out if not (f.id == "nodes-differ-python" and f.severity == "warning")]
    return [*duplicate_ranks(nodes), *out, *clock_findings(peers, skew_s)]


def bind_address(plan: LaunchPlan, setup: NetworkSetup) -> str:
    """Where the master listens: the master address's own interface, loopback for loopback.

    A master name that resolves to loopback only here (Debian's ``127.0.1.1 <hostname>``) binds
    the outward interface's address the network checks chose (``setup.local_addr``). Only when
    none is known: every interface ("").
    """
    ip = setup.master_ip
    if ip is None:
        return ""
    if all_on_this_machine(plan) or not is_loopback(ip):
        return ip
    return setup.local_addr or ""


def listen(host: str, port: int) -> socket.socket:
    if host:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        return socket.create_server((host, port), family=family)
    if socket.has_dualstack_ipv6():
        return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
    return socket.create_server(("", port))


@dataclass
class Joined:
    conn: socket.socket
    hello: Hello
    skew_s: float


@dataclass
class Gathering:
    """The master's state while nodes join: joined nodes and one line per refused peer."""

    key: JobKey
    deadline: float
    clock: Callable[[], float]
    results: queue.Queue[Joined | str] = field(default_factory=queue.Queue)
    joined: list[Joined] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    pending: int = 0
    nonces: set[str] = field(default_factory=set)


def handshake(state: Gathering, conn: socket.socket, peer: str) -> None:
    """One connection, on its own thread: its Hello, or a refusal (sent back to it, if it can)."""
    deadline = min(time.monotonic() + READ_S, state.deadline)
    try:
        hello = decode(read_line(conn, deadline, PEER_LINE_MAX), state.key, Hello)
        state.results.put(Joined(conn, hello, hello.time - state.clock()))
    except Refused as exc:
        reason = str(exc)
        send(conn, encode(state.key, Answer(nonce="0" * 32, refused=reason[:256])), 1.0)
        conn.close()
        state.results.put(f"{peer}: {reason}")


def take_results(state: Gathering, on_refuse: Callable[[str], None] | None) -> None:
    while True:
        try:
            item = state.results.get_nowait()
        except queue.Empty:
            return
        state.pending -= 1
        if isinstance(item, str):
            state.refused.append(item)
            if on_refuse:
                on_refuse(item)
        elif item.hello.nonce in state.nonces:  # a replayed message
            item.conn.close()
            state.refused.append("a replayed message (its nonce was seen before)")
        else:
            state.nonces.add(item.hello.nonce)
            state.joined.append(item)


def accept_some(listener: socket.socket, state: Gathering) -> None:
    try:
        conn, addr = listener.accept()
    except TimeoutError:
        return
    except OSError:
        time.sleep(0.1)  # e.g. EMFILE: try again, bounded by the deadline
        return
    if state.pending >= PENDING_MAX:
        conn.close()
        return
    state.pending += 1
    peer = f"{addr[0]}:{addr[1]}"
    threading.Thread(target=handshake, args=(state, conn, peer), daemon=True,
                     name="distrun-nodesync").start()


def missing(state: Gathering, expected: int, wait_s: float) -> NodesMissing:
    for j in state.joined:
        j.conn.close()
    names = ", ".join(label(j.hello.facts) for j in state.joined) or "none"
    refused = "; ".join(state.refused[:5]) + (" ..." if len(state.refused) > 5 else "")
    return NodesMissing(
        f"{len(state.joined)} of {expected} other node(s) joined the master within "
        f"{wait_s:.0f} s (joined: {names}" + (f"; refused: {refused}" if refused else "") + ")",
        "distrun launch on every node with the same --nnodes, master address/port and "
        "DISTRUN_JOB_TOKEN",
        "start the missing nodes (in a Slurm allocation: srun --ntasks-per-node=1 "
        "distrun launch ...), or raise --master-wait")


def gather(listener: socket.socket, expected: int, wait_s: float, key: JobKey, *,
           clock: Callable[[], float], on_refuse: Callable[[str], None] | None = None
           ) -> list[Joined]:
    state = Gathering(key, time.monotonic() + wait_s, clock)
    listener.settimeout(0.2)
    while len(state.joined) < expected:
        if time.monotonic() > state.deadline:
            raise missing(state, expected, wait_s)
        accept_some(listener, state)
        take_results(state, on_refuse)
    return state.joined[:expected]


def serve(port: int, expected: int, facts: NodeFacts, wait_s: float,
          clock: Callable[[], float] = time.time, *, host: str = "",
          key: JobKey | None = None, on_refuse: Callable[[str], None] | None = None
          ) -> list[Finding]:
    """The master's side: gather ``expected`` nodes, close the port, answer, return findings."""
    key = key or JobKey(None)
    try:
        listener = listen(host, port)
    except (OSError, ValueError) as exc:
        where = f"{host}:{port}" if host else f"port {port}"
        raise DistrunError(f"cannot listen on the master address {where}: "
                           f"{getattr(exc, 'strerror', None) or exc}",
                           "a free port on an address of this node",
                           "pass a free --master-port on every node; run the master (node rank "
                           "0) on the host named by --master-addr") from None
    try:
        joined = gather(listener, expected, wait_s, key, clock=clock, on_refuse=on_refuse)
    finally:
        listener.close()
    findings = compare(facts, [j.hello.facts for j in joined], [j.skew_s for j in joined])
    for j in joined:  # a node that gave up waiting reports its own error
        send(j.conn, encode(key, Answer(nonce=j.hello.nonce, findings=findings)))
    deadline = time.monotonic() + 2.0
    for j in joined:  # let the node close first: the TIME_WAIT stays on its side, not the port
        with contextlib.suppress(Refused):
            read_line(j.conn, deadline, 1)
        j.conn.close()
    return findings


def no_answer(where: str, wait_s: float, why: str) -> NodesMissing:
    return NodesMissing(
        f"the master {where} accepted the connection but gave no valid preflight answer within "
        f"{wait_s:.0f} s ({why})",
        "distrun launch on the master node, answering once every node joined",
        "see the master's output (its preflight may have failed, or other nodes are "
        "missing); plain torchrun on the master does not answer: use distrun launch there")


def join(conn: socket.socket, facts: NodeFacts, wait_s: float, where: str,
         clock: Callable[[], float] = time.time, *, key: JobKey | None = None
         ) -> list[Finding]:
    """A node's side, on a connection to the master: send the facts, return the findings."""
    key = key or JobKey(None)
    hello = Hello(facts=facts, time=clock(), nonce=new_nonce())
    with conn:
        send(conn, encode(key, hello), timeout=min(wait_s, 10.0))
        try:
            line = read_line(conn, time.monotonic() + wait_s, ANSWER_LINE_MAX)
            answer = decode(line, key, Answer)
        except Refused as exc:
            raise no_answer(where, wait_s, str(exc)) from None
    if answer.refused is not None:
        raise NodesMissing(f"the master {where} refused this node: {answer.refused}",
                           "the same DISTRUN_JOB_TOKEN and distrun version on every node",
                           "export the job's DISTRUN_JOB_TOKEN on this node too")
    if answer.nonce != hello.nonce:
        raise no_answer(where, wait_s, "the answer is not for this node's message")
    return list(answer.findings)
