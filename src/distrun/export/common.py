"""Pieces every renderer shares: the torchrun arguments of the plan, quoting, a header line."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from distrun.errors import UsageError
from distrun.model.plan import LaunchPlan, NodePlan

DEFAULT_RDZV_PORT = 29500
_TOPOLOGY_FLAGS = {"--nnodes", "--node-rank", "--master-addr", "--master-port", "--rdzv-backend",
                   "--rdzv-endpoint", "--rdzv-id"}


class ExportError(UsageError):
    """The plan cannot be expressed in the format asked for (bad input: exit status 2)."""


def quote_all(argv: Iterable[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def strip_env(command: str, env: dict[str, str]) -> str:
    """A plan command without its ``VAR=value`` prefix (the planner writes it quoted)."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    if not prefix:
        return command
    if command.startswith(prefix + " "):
        return command[len(prefix) + 1:]
    return quote_all(shlex.split(command)[len(env):])


def worker_args(plan: LaunchPlan) -> list[str]:
    """torchrun's arguments after the topology flags: ``--nproc-per-node N``, the flags passed
    through, ``-m``/``--no-python``, the script and its arguments (the same on every node)."""
    node = plan.nodes[0]
    argv = shlex.split(strip_env(plan.commands[0], node.env))
    k = 1  # argv[0] is torchrun
    while k < len(argv) and (argv[k] == "--standalone" or argv[k] in _TOPOLOGY_FLAGS):
        k += 1 if argv[k] == "--standalone" else 2
    tail = argv[k:]
    if not tail or tail[0] != "--nproc-per-node":
        raise ExportError(f"plan command {plan.commands[0]!r} has no --nproc-per-node where "
                          "expected", "a command made by distrun's planner",
                          "make the plan with 'distrun plan' (or distrun.plan.planner.build)")
    return tail


def rdzv_port(plan: LaunchPlan) -> int:
    """The port of the rendezvous store; 0 (pick at start) becomes torchrun's usual 29500."""
    return plan.master_port or DEFAULT_RDZV_PORT


def summary(plan: LaunchPlan) -> str:
    return (f"{plan.nnodes} node(s) x {plan.nproc_per_node} process(es) = world size "
            f"{plan.world_size}; backend {plan.backend}; device {plan.device_type} "
            f"({plan.vendor})")


def ranks_text(node: NodePlan) -> str:
    if not node.ranks:
        return "none"
    return f"{node.ranks[0]}-{node.ranks[-1]}" if len(node.ranks) > 1 else str(node.ranks[0])
