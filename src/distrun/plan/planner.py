"""Request + inventories -> LaunchPlan. Pure: no I/O, no environment, no processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distrun.accelerators.inventory import NodeInventory
from distrun.accelerators.vendors import VENDORS
from distrun.errors import UsageError
from distrun.model.batch import batch_env
from distrun.model.invocation import (
    DEFAULT_PORT,
    TORCHRUN_DEFAULT_ID,
    Invocation,
    Nnodes,
    Rendezvous,
    WorkerCommand,
    parse_conf,
)
from distrun.model.limits import NPROC_MAX
from distrun.model.plan import LaunchPlan, NodePlan, Request


@dataclass(frozen=True)
class Topology:
    nnodes: Nnodes
    nproc: int
    master_addr: str
    master_port: int
    rendezvous: Rendezvous

    @property
    def rdzv_backend(self) -> str:
        return "static" if self.rendezvous.kind == "static" else self.rendezvous.backend

    @property
    def rdzv_endpoint(self) -> str:
        return self.rendezvous.endpoint or f"{self.master_addr}:{self.master_port}"


def cpu_default_nproc(cpus: int | None) -> int:
    """CPU jobs: one process per 2 cores, at most 4 (more ranks mostly add gloo traffic)."""
    return max(1, min(4, (cpus or 2) // 2))


# ``--nproc-per-node`` words naming a kind of device (torchrun's): one process per such device
# of the node. torchrun refuses them where there is none ("Cuda is not available."), and so
# does distrun, rather than quietly planning CPU processes. "gpu": any accelerator.
DEVICE_WORDS = {"gpu": "GPU (or other accelerator)", "xpu": "Intel XPU"}


def parse_nproc(text: str | None, node: NodeInventory) -> int:
    """``--nproc-per-node`` as torchrun reads it; unset means one per device (CPU: a default;
    a declared CPU inventory such as ``1x8xcpu`` names its slots: one process each)."""
    if text in (None, "auto"):
        if node.is_accelerated or (node.declared and node.count):
            return node.count
        return cpu_default_nproc(node.cpus)
    if text in DEVICE_WORDS:
        return device_nproc(text, node)
    if text == "cpu":
        return node.cpus or 1
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"--nproc-per-node {text!r} is not a number",
                         f"an integer, or auto / {' / '.join(DEVICE_WORDS)} / cpu",
                         "pass e.g. --nproc-per-node 8") from None
    if not 1 <= value <= NPROC_MAX:
        raise UsageError(f"--nproc-per-node {value} is out of range", f"1 to {NPROC_MAX}",
                         "pass e.g. --nproc-per-node 8 (one process per device)")
    return value


def device_nproc(word: str, node: NodeInventory) -> int:
    """``gpu`` / ``xpu``: the node's devices of that kind; a UsageError where it has none."""
    kind = node.is_accelerated if word == "gpu" else node.info.torch_device == word
    if kind and node.count:
        return node.count
    where = "the declared inventory" if node.declared else "this host"
    found = "no accelerator found" if not node.is_accelerated else \
        f"it has {node.count} {node.info.label} device(s)"
    raise UsageError(f"--nproc-per-node {word} asks for one process per {DEVICE_WORDS[word]}, "
                     f"but {where} has none ({found})", "a node with such devices",
                     "pass --nproc-per-node N (or auto: one per device, CPU processes where there "
                     "is none), or --inventory NxDxMODEL to plan for machines that have them")


def resolve_topology(req: Request, nodes: Sequence[NodeInventory]) -> Topology:
    nnodes = req.nnodes or Nnodes(len(nodes), len(nodes))
    nproc = parse_nproc(req.nproc_per_node, nodes[0])
    rdzv_id = req.rdzv_id or TORCHRUN_DEFAULT_ID
    conf = parse_conf(req.rdzv_conf)
    if req.rdzv_endpoint and not req.standalone:
        host, _, port = req.rdzv_endpoint.rpartition(":")
        if not host or not port.isdigit():
            host, port = req.rdzv_endpoint, str(DEFAULT_PORT)
        rdzv = Rendezvous("dynamic", req.rdzv_backend or "c10d", req.rdzv_endpoint,
                          rdzv_id=rdzv_id, conf=conf)
        return Topology(nnodes, nproc, host, int(port), rdzv)
    if nnodes.max == 1 and req.master_port is None:
        # torchrun's own single-node choice: the store binds port 0, so no race for a port.
        rdzv = Rendezvous("standalone", "c10d", "localhost:0", conf=conf)
        return Topology(Nnodes(1, 1), nproc, "localhost", 0, rdzv)
    addr = req.master_addr or (nodes[0].host if nodes[0].declared else "127.0.0.1")
    master_port = req.master_port if req.master_port is not None else DEFAULT_PORT
    rdzv = Rendezvous("static", "static", master_addr=addr, master_port=master_port,
                      rdzv_id=rdzv_id, conf=conf)
    return Topology(nnodes, nproc, addr, master_port, rdzv)


def build(req: Request, nodes: Sequence[NodeInventory]) -> LaunchPlan:
    """The plan for ``req`` on ``nodes`` (declared, or this node when detected)."""
    topo = resolve_topology(req, nodes)
    count = topo.nnodes.max
    node_invs = [nodes[k] if k < len(nodes) else nodes[0] for k in range(count)]
    vendor = VENDORS[nodes[0].vendor]
    backend = req.backend or vendor.backend
    node_plans = [_node_plan(k, inv, topo, req) for k, inv in enumerate(node_invs)]
    env = {**_job_env(nodes[0], topo),
           **batch_env(req.global_batch_size, req.per_device_batch_size,
                       count * topo.nproc, req.preset, req.train_config)}
    return LaunchPlan(
        world_size=count * topo.nproc,
        backend=backend,
        master_addr=topo.master_addr,
        master_port=topo.master_port,
        nodes=node_plans,
        findings=[],
        vendor=vendor.id.value,
        device_type=vendor.torch_device,
        nnodes=count,
        nproc_per_node=topo.nproc,
        rdzv_backend=topo.rdzv_backend,
        rdzv_endpoint=topo.rdzv_endpoint,
        env=env,
        script=req.script,
        script_args=list(req.script_args),
    )


def invocation(req: Request, topo: Topology, node_rank: int) -> Invocation:
    """Node ``node_rank``'s torchrun: the rendezvous decided once, the user's flags as given."""
    worker = WorkerCommand(req.script or "SCRIPT", tuple(req.script_args), req.module,
                           req.no_python)
    return Invocation(topo.rendezvous, topo.nnodes, topo.nproc, node_rank, worker,
                      req.local_addr, tuple(req.passthrough))


def _node_plan(k: int, inv: NodeInventory, topo: Topology, req: Request) -> NodePlan:
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
        invocation=invocation(req, topo, k),
    )


def _job_env(node: NodeInventory, topo: Topology) -> dict[str, str]:
    """Defaults for every process; variables the user already set win at launch."""
    threads = max(1, (node.cpus or topo.nproc) // topo.nproc)
    return {"OMP_NUM_THREADS": str(threads)} if node.cpus else {}
