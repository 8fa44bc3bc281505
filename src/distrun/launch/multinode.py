"""Multi-node steps of ``distrun launch``, between the checked plan and torchrun.

1. :func:`network` (cheap, also for ``--dry-run``): the interface and loopback-hostname checks
   of ``distrun.checks.network``; their fixes are applied to the plan itself: the job's
   environment (GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME) and this node's invocation
   (``--local-addr``, ``--rdzv-conf is_host=``). So ``--dry-run``, ``plan.json`` and what
   torchrun receives are one value.
2. :func:`sync` (has effects: waits for the other nodes): the TCP probe of the master's port
   and the exchange of ``distrun.checks.nodesync``. A node that cannot reach the master stops
   here within seconds, instead of after torchrun's rendezvous timeout. It returns a value;
   the CLI prints it and maps it to an exit status.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from distrun.checks.network import NetworkSetup, network_setup, probe_master
from distrun.errors import DistrunError
from distrun.model.plan import Finding, LaunchPlan


def apply_network(plan: LaunchPlan, node_rank: int, setup: NetworkSetup) -> LaunchPlan:
    """``plan`` with the network findings, the job environment and this node's torchrun
    flags (an address or ``is_host`` the user gave wins)."""
    plan = plan.with_findings(setup.findings).model_copy(
        update={"env": {**plan.env, **setup.env}})
    node = plan.nodes[node_rank]
    inv = node.invocation
    if setup.local_addr and not inv.local_addr:
        inv = replace(inv, local_addr=setup.local_addr)
    if setup.hosts_store is not None:
        inv = replace(inv, rendezvous=inv.rendezvous.with_conf(
            "is_host", str(int(setup.hosts_store))))
    nodes = list(plan.nodes)
    nodes[node_rank] = node.model_copy(update={"invocation": inv})
    return plan.model_copy(update={"nodes": nodes})


def network(plan: LaunchPlan, node_rank: int, env: Mapping[str, str]
            ) -> tuple[LaunchPlan, NetworkSetup]:
    """The plan with this node's network findings and fixes applied, and the facts found."""
    setup = network_setup(plan, env)
    if plan.nnodes < 2 or not 0 <= node_rank < plan.nnodes:
        return plan, setup
    return apply_network(plan, node_rank, setup), setup


def role(plan: LaunchPlan, node_rank: int, setup: NetworkSetup) -> str | None:
    """'master', 'node', or None when the exchange cannot run (elastic, unknown host)."""
    if plan.nnodes < 2 or plan.nodes[0].invocation.nnodes.elastic:
        return None
    if plan.rdzv_backend == "static":
        return "master" if node_rank == 0 else "node"
    if setup.hosts_store is None:
        return None
    return "master" if setup.hosts_store else "node"


@dataclass(frozen=True)
class SyncResult:
    """The nodes' exchange: the plan with its findings, the findings it added, and why it
    could not run when it failed (``error``, one line)."""

    plan: LaunchPlan
    found: list[Finding] = field(default_factory=list)
    error: str | None = None
    ran: bool = True


def sync(plan: LaunchPlan, node_rank: int | None, setup: NetworkSetup, wait_s: float,
         say: Callable[[str], None], *, env: Mapping[str, str] = os.environ) -> SyncResult:
    """Probe the master and compare the nodes (``say`` prints a progress line); the exchange is
    signed with DISTRUN_JOB_TOKEN from ``env`` (a warning when it is unset)."""
    me = role(plan, node_rank or 0, setup)
    if me is None:
        return SyncResult(plan, ran=False)
    from distrun.checks.nodesync import bind_address, join, local_facts, serve  # multi-node only
    from distrun.checks.nodewire import job_key

    facts = local_facts(plan.script, node_rank if plan.rdzv_backend == "static" else None,
                        plan.vendor, plan)
    where = f"{plan.master_addr}:{plan.master_port}"
    key, note = job_key(env)
    if note:
        say(f"warning: {note}")
    try:
        if me == "master":
            host = bind_address(plan, setup)
            say(f"waiting for {plan.nnodes - 1} other node(s) on {host or '*'}:"
                f"{plan.master_port} (up to {wait_s:.0f} s)")
            found = serve(plan.master_port, plan.nnodes - 1, facts, wait_s, host=host, key=key,
                          on_refuse=lambda line: say(f"refused a peer: {line}"))
        else:
            conn = probe_master(plan.master_addr, plan.master_port, wait_s, on_wait=say)
            found = join(conn, facts, wait_s, where, key=key)
    except DistrunError as exc:
        return SyncResult(plan, error=exc.one_line())
    return SyncResult(plan.with_findings(found), found)
