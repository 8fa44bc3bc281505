"""More processes than the node can run side by side: CPU cores (devices: the planner's own
``nproc-exceeds-devices`` finding already covers them, so this check does not repeat it).

Not an error (oversubscription is sometimes wanted, e.g. to test a 16-rank layout on a laptop),
but each process then gets a fraction of a core or shares a device: throughput drops and
collectives time out more easily. The coordinator wires :func:`capacity_findings` into the plan
checks; it is pure over the plan and the core count passed in.
"""

from __future__ import annotations

import os

from distrun.model.plan import Finding, LaunchPlan


def usable_cpus() -> int | None:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def capacity_findings(plan: LaunchPlan, cpus: int | None) -> list[Finding]:
    """A warning per node of a CPU job planning more processes than its usable cores."""
    out: list[Finding] = []
    for node in plan.nodes:
        where = f"node {node.node_rank} ({node.host})" if plan.nnodes > 1 else "this node"
        if plan.device_type == "cpu" and cpus is not None and node.nproc > cpus:
            out.append(Finding(
                id="oversubscribed-cpus", severity="warning",
                message=f"{where} plans {node.nproc} processes on {cpus} usable CPU core(s): "
                        "each process gets a fraction of a core",
                fix=f"pass --nproc-per-node {cpus} or fewer (or more cores to the job)"))
    return out
