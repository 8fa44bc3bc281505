"""Preflight: inventories (declared or detected) -> plan -> this host's checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distrun.accelerators.detect import detect
from distrun.accelerators.inventory import NodeInventory, parse_declared
from distrun.checks.capacity import capacity_findings, usable_cpus
from distrun.checks.host import HostContext, host_findings
from distrun.checks.topology import topology_findings
from distrun.model.plan import Finding, LaunchPlan, Request
from distrun.plan.planner import build


def inventories(declared: str | None, env: Mapping[str, str]) -> tuple[NodeInventory, ...]:
    return parse_declared(declared) if declared else (detect(env).node,)


def checked_plan(req: Request, nodes: Sequence[NodeInventory]) -> LaunchPlan:
    """The plan with the topology rules' findings (pure: no host look-ups)."""
    plan = build(req, nodes)
    return plan.with_findings(topology_findings(req, nodes, plan))


def preflight(req: Request, declared: str | None, env: Mapping[str, str]) -> LaunchPlan:
    """The checked plan. Host checks run only when planning for this host."""
    nodes = inventories(declared, env)
    plan = checked_plan(req, nodes)
    if declared:
        note = Finding(id="host-checks-skipped", severity="info",
                       message="planned for a declared inventory: checks of this host's ports, "
                               "names and torch build were not run",
                       fix="run 'distrun plan' without --inventory on the node itself")
        return plan.with_findings([note])
    ctx = HostContext(node_rank=req.node_rank or 0, env=env)
    return plan.with_findings([*host_findings(plan, ctx), *capacity_findings(plan, usable_cpus())])
