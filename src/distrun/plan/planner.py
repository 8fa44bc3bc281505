"""Request + inventories -> LaunchPlan. Pure: no I/O, no environment, no processes."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from distrun.accelerators.inventory import NodeInventory
from distrun.accelerators.vendors import VENDORS
from distrun.checks.topology import topology_findings
from distrun.errors import UsageError
from distrun.model.plan import Finding, LaunchPlan, NodePlan, Request

DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class Topology:
    nnodes: int
    nproc: int
    master_addr: str
    master_port: int
    rdzv_backend: str
    rdzv_endpoint: str


def cpu_default_nproc(cpus: int | None) -> int:
    """CPU jobs: one process per 2 cores, at most 4 (more ranks mostly add gloo traffic)."""
    return max(1, min(4, (cpus or 2) // 2))


def parse_nnodes(text: str | None, inventory_nodes: int) -> int:
    """``--nnodes 2`` or ``1:2`` (elastic: planned at the maximum)."""
    if text is None:
        return inventory_nodes
    low, _, high = text.partition(":")
    try:
        lo, hi = int(low), int(high or low)
    except ValueError:
        raise UsageError(f"--nnodes {text!r} is not a number", "N or MIN:MAX",
                         "pass e.g. --nnodes 2") from None
    if not 0 < lo <= hi:
        raise UsageError(f"--nnodes {text!r} is out of range", "0 < MIN <= MAX",
                         "pass e.g. --nnodes 2 or --nnodes 1:4")
    return hi


def parse_nproc(text: str | None, node: NodeInventory) -> int:
    """``--nproc-per-node`` as torchrun reads it; unset means one per device (CPU: a default;
    a declared CPU inventory such as ``1x8xcpu`` names its slots: one process each)."""
    if text in (None, "auto", "gpu"):
        if node.is_accelerated or (node.declared and node.count):
            return node.count
        return cpu_default_nproc(node.cpus)
    if text == "cpu":
        return node.cpus or 1
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"--nproc-per-node {text!r} is not a number",
                         "an integer, or auto / gpu / cpu", "pass e.g. --nproc-per-node 8") from None
    if value < 1:
        raise UsageError(f"--nproc-per-node {value} is below 1", "at least 1",
                         "pass e.g. --nproc-per-node 8")
    return value


def resolve_topology(req: Request, nodes: Sequence[NodeInventory]) -> Topology:
    nnodes = parse_nnodes(req.nnodes, len(nodes))
    nproc = parse_nproc(req.nproc_per_node, nodes[0])
    if req.rdzv_endpoint and not req.standalone:
        host, _, port = req.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit():
            host, port = req.rdzv_endpoint, str(DEFAULT_MASTER_PORT)
        return Topology(nnodes, nproc, host, int(port), req.rdzv_backend or "c10d",
                        req.rdzv_endpoint)
    if nnodes == 1 and req.master_port is None:
        # torchrun's own single-node choice: the store binds port 0, so no race for a port.
        return Topology(1, nproc, "localhost", 0, "c10d", "localhost:0")
    addr = req.master_addr or (nodes[0].host if nodes[0].declared else "127.0.0.1")
    master_port = req.master_port if req.master_port is not None else DEFAULT_MASTER_PORT
    return Topology(nnodes, nproc, addr, master_port, "static", f"{addr}:{master_port}")


def build(req: Request, nodes: Sequence[NodeInventory]) -> LaunchPlan:
    """The plan for ``req`` on ``nodes`` (declared, or this node when detected)."""
    topo = resolve_topology(req, nodes)
    node_invs = [nodes[k] if k < len(nodes) else nodes[0] for k in range(topo.nnodes)]
    vendor = VENDORS[nodes[0].vendor]
    backend = req.backend or vendor.backend
    node_plans = [_node_plan(k, inv, topo) for k, inv in enumerate(node_invs)]
    env = _job_env(nodes[0], topo)
    draft = LaunchPlan(
        world_size=topo.nnodes * topo.nproc,
        backend=backend,
        master_addr=topo.master_addr,
        master_port=topo.master_port,
        nodes=node_plans,
        findings=[],
        commands=[_command(req, topo, n) for n in node_plans],
        vendor=vendor.id.value,
        device_type=vendor.torch_device,
        nnodes=topo.nnodes,
        nproc_per_node=topo.nproc,
        rdzv_backend=topo.rdzv_backend,
        rdzv_endpoint=topo.rdzv_endpoint,
        env=env,
        script=req.script,
        script_args=list(req.script_args),
    )
    findings: list[Finding] = topology_findings(req, nodes, draft)
    return draft.with_findings(findings)


def _node_plan(k: int, inv: NodeInventory, topo: Topology) -> NodePlan:
    var = inv.info.visibility_var
    visible = [d.index for d in inv.devices] if inv.is_accelerated else []
    env = {var: ",".join(map(str, visible))} if var and visible else {}
    host = inv.host if inv.declared else (inv.host if k == 0 else f"node{k}")
    return NodePlan(
        node_rank=k,
        host=host,
        nproc=topo.nproc,
        visible_devices=visible,
        ranks=list(range(k * topo.nproc, (k + 1) * topo.nproc)),
        env=env,
    )


def _job_env(node: NodeInventory, topo: Topology) -> dict[str, str]:
    """Defaults for every process; variables the user already set win at launch."""
    threads = max(1, (node.cpus or topo.nproc) // topo.nproc)
    return {"OMP_NUM_THREADS": str(threads)} if node.cpus else {}


def _command(req: Request, topo: Topology, node: NodePlan) -> str:
    argv: list[str] = ["torchrun"]
    if topo.rdzv_endpoint == "localhost:0":
        argv += ["--standalone"]
    elif topo.rdzv_backend == "static":
        argv += ["--nnodes", str(topo.nnodes), "--node-rank", str(node.node_rank),
                 "--master-addr", topo.master_addr, "--master-port", str(topo.master_port)]
    else:
        argv += ["--nnodes", req.nnodes or str(topo.nnodes), "--rdzv-backend", topo.rdzv_backend,
                 "--rdzv-endpoint", topo.rdzv_endpoint, "--rdzv-id", req.rdzv_id or "distrun"]
    argv += ["--nproc-per-node", str(topo.nproc), *req.passthrough]
    argv += ["-m"] if req.module else []
    argv += ["--no-python"] if req.no_python else []
    argv += [req.script or "SCRIPT", *req.script_args]
    prefix = [f"{k}={shlex.quote(v)}" for k, v in node.env.items()]
    return " ".join([*prefix, *(shlex.quote(a) for a in argv)])
