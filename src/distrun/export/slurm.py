"""``distrun export slurm``: an sbatch script, one task per node, each running one torchrun agent.

The agents meet (c10d rendezvous) at the first node of ``$SLURM_JOB_NODELIST``, addressed by
its ``NodeAddr`` from ``scontrol show node``: a node *name* need not resolve on every site.
The rendezvous id is the job id, so two jobs never join each other.
"""

from __future__ import annotations

import shlex

from distrun.accelerators.vendors import VENDORS, vendor_named
from distrun.export.common import rdzv_port, shared_args, summary
from distrun.export.options import ExportOptions
from distrun.model.invocation import quote_all
from distrun.model.plan import LaunchPlan

# Slurm's gres/gpu plugin sets these for the devices it allocates; the script leaves them alone.
SET_BY_SLURM = frozenset(var for v in VENDORS.values() if v.deploy.slurm_sets_visibility
                         for var in v.visibility_vars)

_HEAD = """\
# Rendezvous host: the first node of the allocation, by its NodeAddr (a node name need not resolve).
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)
head_addr=$(scontrol show node "$head_node" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')
head_addr=${head_addr:-$head_node}
"""


def _gres(vendor: str) -> bool:
    row = vendor_named(vendor)
    return row is not None and row.deploy.slurm_gres


def cpus_per_task(plan: LaunchPlan, options: ExportOptions) -> int:
    """Asked for, else the plan's threads x processes, else one core per process."""
    if options.cpus_per_task is not None:
        return options.cpus_per_task
    threads = plan.env.get("OMP_NUM_THREADS", "")
    return int(threads) * plan.nproc_per_node if threads.isdigit() else plan.nproc_per_node


def directives(plan: LaunchPlan, options: ExportOptions) -> list[str]:
    pairs: list[tuple[str, str | int | None]] = [
        ("job-name", options.job_name),
        ("nodes", plan.nnodes),
        ("ntasks-per-node", 1),
        ("gpus-per-node", plan.nproc_per_node if _gres(plan.vendor) else None),
        ("cpus-per-task", cpus_per_task(plan, options)),
        ("time", options.time),
        ("partition", options.partition),
        ("account", options.account),
        ("output", options.sbatch_output),
        ("error", options.sbatch_error),
    ]
    return [f"#SBATCH --{k}={shlex.quote(str(v))}" for k, v in pairs if v is not None]


def exports(plan: LaunchPlan) -> list[str]:
    env = {**plan.env, **plan.nodes[0].env}
    return [f"export {k}={shlex.quote(v)}" for k, v in env.items() if k not in SET_BY_SLURM]


def torchrun_line(plan: LaunchPlan, options: ExportOptions) -> str:
    tail = quote_all(shared_args(plan))
    program = quote_all(options.torchrun_argv())
    if plan.nnodes == 1:
        return f"{program} --standalone {tail}"
    endpoint = f'"$head_addr:{rdzv_port(plan)}"'
    return (f"{program} --nnodes {plan.nnodes} --rdzv-backend c10d "
            f'--rdzv-endpoint {endpoint} --rdzv-id "$SLURM_JOB_ID" {tail}')


def render(plan: LaunchPlan, options: ExportOptions) -> str:
    lines = ["#!/bin/bash",
             f"# Made by 'distrun export slurm': {summary(plan)}.",
             "# One task per node runs one torchrun agent. Submit with: sbatch THIS_FILE",
             *directives(plan, options),
             "set -eu", ""]
    env_lines = exports(plan)
    lines += [*env_lines, ""] if env_lines else []
    lines += [_HEAD] if plan.nnodes > 1 else []
    srun = (f"srun --nodes={plan.nnodes} --ntasks={plan.nnodes} --ntasks-per-node=1 "
            f"--cpus-per-task={cpus_per_task(plan, options)} --kill-on-bad-exit=1")
    lines += [f"{srun} \\", f"  {torchrun_line(plan, options)}", ""]
    return "\n".join(lines)
