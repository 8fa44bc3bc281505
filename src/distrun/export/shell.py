"""``distrun export shell``: one POSIX sh script per node, each ending in that node's torchrun."""

from __future__ import annotations

import shlex

from distrun.export.common import ranks_text, summary
from distrun.export.options import ExportOptions
from distrun.model.invocation import quote_all
from distrun.model.plan import LaunchPlan, NodePlan


def command(node: NodePlan, options: ExportOptions) -> list[str]:
    """The node's torchrun argv behind the ``--torchrun`` command's own words."""
    return [*options.torchrun_argv(), *node.invocation.argv()[1:]]


def script(plan: LaunchPlan, node: NodePlan, options: ExportOptions) -> str:
    env = {**plan.env, **node.env}
    torchrun = quote_all(command(node, options))
    lines = [
        "#!/bin/sh",
        f"# Made by 'distrun export shell': {summary(plan)}.",
        f"# Node {node.node_rank} of {plan.nnodes} ({node.host}): ranks {ranks_text(node)}. "
        "Run it there; start every node's script.",
        "set -eu",
        *(f"export {k}={shlex.quote(v)}" for k, v in env.items()),
        f"exec {torchrun}",
        "",
    ]
    return "\n".join(lines)


def render(plan: LaunchPlan, options: ExportOptions) -> dict[str, str]:
    """``{"node-0.sh": text, ...}``, one per node of the plan."""
    return {f"node-{n.node_rank}.sh": script(plan, n, options) for n in plan.nodes}

