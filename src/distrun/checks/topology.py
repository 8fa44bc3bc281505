"""Pure preflight rules over a request, the inventories and the draft plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distrun.accelerators.inventory import NodeInventory
from distrun.accelerators.vendors import (
    ALL_BACKENDS,
    GENERIC_BACKENDS,
    KNOWN_BACKENDS,
    VENDORS,
    vendors_for_backend,
)
from distrun.model.plan import Finding, LaunchPlan, Request

Rule = Callable[[Request, Sequence[NodeInventory], LaunchPlan], list[Finding]]


def nproc_exceeds_devices(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan
                          ) -> list[Finding]:
    node = nodes[0]
    if not node.is_accelerated or plan.nproc_per_node <= node.count:
        return []
    per_node, wanted = node.count, plan.nproc_per_node
    beyond = (f"local rank {per_node}" if wanted - per_node == 1
              else f"local ranks {per_node}-{wanted - 1}")
    return [Finding(
        id="nproc-exceeds-devices",
        severity="error",
        message=(f"{wanted} processes per node, but each node has {per_node} "
                 f"{node.info.label} device{'' if per_node == 1 else 's'}: {beyond} would fail "
                 f"with 'invalid device ordinal'"),
        fix=_nproc_fix(per_node, wanted, plan.nnodes),
    )]


def _nproc_fix(per_node: int, wanted: int, nnodes: int) -> str:
    fix = (f"use --nproc-per-node {per_node} (one process per device): with --nnodes {nnodes} "
           f"that is world size {nnodes * per_node}")
    needed = -(-wanted // per_node)
    if nnodes < needed:
        fix += (f"; for {wanted} processes in all, run {needed} nodes x {per_node}: "
                f"--nnodes {needed} --nproc-per-node {per_node} on every node")
    return fix


def visible_devices_missing(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan
                            ) -> list[Finding]:
    node = nodes[0]
    if not node.invalid_visible:
        return []
    var = node.info.visibility_var
    have = ",".join(str(d.index) for d in node.devices) or "none"
    count = node.physical_count or node.count
    return [Finding(
        id="visible-device-missing",
        severity="error",
        message=(f"{var}={node.visibility} names {','.join(node.invalid_visible)}, but this node "
                 f"has {count} devices (ordinals 0-{count - 1})"),
        fix=f"set {var} to ordinals this node has (usable now: {have}), or unset it",
    )]


def backend_fits(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan) -> list[Finding]:
    backend, vendor = plan.backend, VENDORS[nodes[0].vendor]
    if backend in vendor.backends or backend in GENERIC_BACKENDS:
        return []
    if backend not in ALL_BACKENDS:
        known = ", ".join(sorted(KNOWN_BACKENDS))
        return [Finding(id="backend-unknown", severity="error",
                        message=f"backend {backend!r} is not a collective backend distrun knows",
                        fix=f"use one of {known}, or leave --backend out ({vendor.backend} here)")]
    wants = " or ".join(v.label for v in vendors_for_backend(backend))
    return [Finding(
        id="backend-mismatch",
        severity="error",
        message=f"backend {backend} needs {wants} devices, but the node has {vendor.label} devices",
        fix=f"leave --backend out (distrun picks {vendor.backend}) or pass --backend {vendor.backend}",
    )]


def node_rank_range(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan
                    ) -> list[Finding]:
    rank = req.node_rank
    if rank is None or 0 <= rank < plan.nnodes:
        return []
    return [Finding(id="node-rank-out-of-range", severity="error",
                    message=f"--node-rank {rank} with --nnodes {plan.nnodes}",
                    fix=f"node ranks run from 0 to {plan.nnodes - 1}: one distinct value per node")]


def master_needed(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan) -> list[Finding]:
    if plan.nnodes == 1 or plan.rdzv_backend != "static" or req.master_addr or nodes[0].declared:
        return []
    return [Finding(id="master-missing", severity="error",
                    message=f"{plan.nnodes} nodes but no --master-addr: every node would use "
                            "127.0.0.1 and wait for itself",
                    fix="pass --master-addr <host of node 0> on every node (or --rdzv-endpoint)")]


def nnodes_vs_inventory(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan
                        ) -> list[Finding]:
    declared = len(nodes) if nodes[0].declared else None
    if declared is None or declared == plan.nnodes:
        return []
    return [Finding(id="nnodes-mismatch", severity="warning",
                    message=f"the inventory declares {declared} nodes, the plan uses {plan.nnodes}",
                    fix=f"pass --nnodes {declared} to use every declared node")]


def idle_devices(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan) -> list[Finding]:
    node = nodes[0]
    if not node.is_accelerated or plan.nproc_per_node >= node.count:
        return []
    idle = node.count - plan.nproc_per_node
    return [Finding(
        id="idle-devices",
        severity="warning",
        message=(f"{node.count} {node.info.label} devices per node, {plan.nproc_per_node} "
                 f"process(es): {idle} device(s) per node will sit idle unless your script "
                 "uses several devices per process"),
        fix=f"use --nproc-per-node {node.count} (or leave it out: distrun uses one per device)",
    )]


def batch_divides(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan) -> list[Finding]:
    total = req.global_batch_size
    if total is None:
        return []
    per = req.per_device_batch_size or 1
    step = plan.world_size * per
    if total % step == 0:
        return [Finding(id="batch-layout", severity="info",
                        message=f"global batch {total} = {plan.world_size} ranks x {per} per "
                                f"device x {total // step} accumulation step(s)")]
    lower, upper = total // step * step, (total // step + 1) * step
    return [Finding(
        id="batch-indivisible",
        severity="error",
        message=(f"global batch size {total} does not divide into {plan.world_size} ranks x "
                 f"{per} per device ({step} per step)"),
        fix=f"use a global batch size that is a multiple of {step}, e.g. "
            f"{lower or upper} or {upper}, or change --per-device-batch-size",
    )]


RULES: tuple[Rule, ...] = (
    nproc_exceeds_devices,
    visible_devices_missing,
    backend_fits,
    node_rank_range,
    master_needed,
    nnodes_vs_inventory,
    idle_devices,
    batch_divides,
)


def topology_findings(req: Request, nodes: Sequence[NodeInventory], plan: LaunchPlan
                      ) -> list[Finding]:
    return [f for rule in RULES for f in rule(req, nodes, plan)]
