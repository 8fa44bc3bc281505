"""``distrun export deepspeed``: a DeepSpeed hostfile, one ``HOST slots=N`` line per node.

DeepSpeed's launcher reads it with ``deepspeed --hostfile FILE``: each line is a host name
and its slot count (processes), ``#`` starts a comment. The names are real ones (see
:func:`~distrun.export.common.node_hosts`): DeepSpeed reaches every line's host over ssh.
"""

from __future__ import annotations

import shlex

from distrun.export.common import ExportError, node_hosts, rdzv_port, summary
from distrun.export.options import ExportOptions
from distrun.model.plan import LaunchPlan


def render(plan: LaunchPlan, options: ExportOptions) -> str:
    hosts = node_hosts(plan, options)
    bad = next((h for h in hosts if not h or any(c.isspace() for c in h)), None)
    if bad is not None:
        raise ExportError(f"host name {bad!r} cannot go in a hostfile", "a name without spaces",
                          "declare the nodes with host names")
    if len(set(hosts)) != len(hosts):
        dup = next(h for h in hosts if hosts.count(h) > 1)
        raise ExportError(f"host {dup!r} appears more than once in the plan",
                          "one line per distinct host", "give every node its own host name")
    master = hosts[0] if plan.master_addr in ("", "node0") else plan.master_addr
    lines = [
        f"# Made by 'distrun export deepspeed': {summary(plan)}.",
        f"# Run: deepspeed --hostfile THIS_FILE --master_addr {shlex.quote(master)} "
        f"--master_port {rdzv_port(plan)} SCRIPT [ARGS]",
    ]
    lines += [f"{h} slots={n.nproc}" for h, n in zip(hosts, plan.nodes, strict=True)]
    return "\n".join(lines) + "\n"
