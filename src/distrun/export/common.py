"""Pieces every renderer shares: the torchrun arguments of the plan's invocation, the port, a
header line. Renderers read the typed invocation; nothing parses a plan's command back."""

from __future__ import annotations

from distrun.errors import UsageError
from distrun.export.options import ExportOptions
from distrun.model.invocation import DEFAULT_PORT
from distrun.model.plan import LaunchPlan, NodePlan


class ExportError(UsageError):
    """The plan cannot be expressed in the format asked for (bad input: exit status 2)."""


def shared_args(plan: LaunchPlan) -> list[str]:
    """torchrun's arguments that are the same on every node, after the rendezvous host: the
    user's ``--rdzv-conf``, ``--nproc-per-node N``, the flags passed through, the worker."""
    inv = plan.nodes[0].invocation
    conf = ["--rdzv-conf", inv.rendezvous.conf_text()] if inv.rendezvous.conf else []
    return [*conf, *inv.worker_argv()]


def rdzv_port(plan: LaunchPlan) -> int:
    """The port of the rendezvous store; 0 (pick at start) becomes torchrun's usual 29500."""
    return plan.master_port or DEFAULT_PORT


def summary(plan: LaunchPlan) -> str:
    return (f"{plan.nnodes} node(s) x {plan.nproc_per_node} process(es) = world size "
            f"{plan.world_size}; backend {plan.backend}; device {plan.device_type} "
            f"({plan.vendor})")


def ranks_text(node: NodePlan) -> str:
    if not node.ranks:
        return "none"
    return f"{node.ranks[0]}-{node.ranks[-1]}" if len(node.ranks) > 1 else str(node.ranks[0])


def node_hosts(plan: LaunchPlan, options: ExportOptions) -> list[str]:
    """The nodes' real host names, in node-rank order: the ``--host``/``--hostfile``/Slurm names
    given, else the plan's, node 0 being the rendezvous address when the plan only has the
    stand-in ``node0``. A stand-in left (``node1`` of a declared inventory) is an error."""
    if options.hosts:
        if len(options.hosts) < plan.nnodes:
            raise ExportError(f"{len(options.hosts)} host name(s) given "
                              f"({', '.join(options.hosts)}) for a plan of {plan.nnodes} nodes",
                              f"at least {plan.nnodes} names",
                              "pass one name per node to --host or in --hostfile")
        return list(options.hosts[:plan.nnodes])
    hosts = [n.host for n in plan.nodes]
    if hosts and hosts[0] == "node0" and plan.master_addr and plan.master_addr != "node0":
        hosts[0] = plan.master_addr
    stand_in = next((k for k, h in enumerate(hosts) if h == f"node{k}"), None)
    if stand_in is not None:
        raise ExportError(f"the plan has no host name for node {stand_in} ('node{stand_in}' "
                          "stands in for it)", "the real host name of every node",
                          "pass --host NAME0,NAME1,... or --hostfile FILE, or export inside "
                          "the Slurm allocation")
    return hosts
