"""Pieces every renderer shares: the torchrun arguments of the plan's invocation, the port, a
header line. Renderers read the typed invocation; nothing parses a plan's command back."""

from __future__ import annotations

from distrun.errors import UsageError
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
