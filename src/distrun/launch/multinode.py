"""Multi-node steps of ``distrun launch``, between the checked plan and torchrun.

1. :func:`network` (cheap, also for ``--dry-run``): the interface and loopback-hostname checks
   of ``distrun.checks.network``; their fixes become the job's environment
   (GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME) and torchrun's ``--local-addr`` / ``--rdzv-conf
   is_host``.
2. :func:`sync` (has effects: waits for the other nodes): the TCP probe of the master's port
   and the exchange of ``distrun.checks.nodesync``. A node that cannot reach the master stops
   here within seconds, instead of after torchrun's rendezvous timeout.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from rich.console import Console

from distrun.checks.network import NetworkSetup, network_setup, probe_master
from distrun.checks.nodesync import bind_address, join, local_facts, serve
from distrun.checks.nodewire import job_key
from distrun.cli import exitcodes, render
from distrun.errors import DistrunError, UsageError
from distrun.model.plan import Finding, LaunchPlan

DEFAULT_MASTER_WAIT_S = 300.0


def add_flags(group: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    group.add_argument("--hostfile", default=env.get("DISTRUN_HOSTFILE"),
                       help="start one distrun launch per host over ssh ('host slots=N' lines)")
    group.add_argument("--master-wait", type=float, default=_wait_default(env),
                       help="seconds the nodes wait for each other before training starts "
                            f"(default {DEFAULT_MASTER_WAIT_S:.0f})")


def _wait_default(env: Mapping[str, str]) -> float:
    raw = env.get("DISTRUN_MASTER_WAIT")
    if raw is None:
        return DEFAULT_MASTER_WAIT_S
    try:
        return float(raw)
    except ValueError:
        raise UsageError(f"DISTRUN_MASTER_WAIT={raw!r} is not a number of seconds",
                         fix="unset DISTRUN_MASTER_WAIT or set it to e.g. 300") from None


def network(plan: LaunchPlan, ns: argparse.Namespace, env: Mapping[str, str]
            ) -> tuple[LaunchPlan, argparse.Namespace, NetworkSetup]:
    """The plan with the network findings and environment; torchrun's flags with the fixes."""
    setup = network_setup(plan, env)
    if plan.nnodes < 2:
        return plan, ns, setup
    plan = plan.with_findings(setup.findings).model_copy(
        update={"env": {**plan.env, **setup.env}})
    out = argparse.Namespace(**vars(ns))
    if setup.local_addr and not ns.local_addr:
        out.local_addr = setup.local_addr
    conf = ns.rdzv_conf or ""
    if setup.hosts_store is not None and "is_host" not in conf:
        out.rdzv_conf = ",".join(filter(None, [conf, f"is_host={int(setup.hosts_store)}"]))
    return plan, out, setup


def role(plan: LaunchPlan, ns: argparse.Namespace, node_rank: int,
         setup: NetworkSetup) -> str | None:
    """'master', 'node', or None when the exchange cannot run (elastic, unknown host)."""
    if plan.nnodes < 2 or (ns.nnodes and ":" in ns.nnodes and ns.nnodes.split(":")[0] !=
                           ns.nnodes.split(":")[1]):
        return None
    if plan.rdzv_backend == "static":
        return "master" if node_rank == 0 else "node"
    if setup.hosts_store is None:
        return None
    return "master" if setup.hosts_store else "node"


def sync(plan: LaunchPlan, ns: argparse.Namespace, node_rank: int | None, setup: NetworkSetup,
         err: Console, *, env: Mapping[str, str] = os.environ) -> tuple[LaunchPlan, int | None]:
    """Probe the master and compare the nodes; (plan with findings, exit status to stop with)."""
    me = role(plan, ns, node_rank or 0, setup)
    if me is None:
        return plan, None
    facts = local_facts(plan.script, node_rank if plan.rdzv_backend == "static" else None,
                        plan.vendor, plan)
    where = f"{plan.master_addr}:{plan.master_port}"
    key, note = job_key(env)
    if note:
        err.print(f"distrun: warning: {note}", highlight=False, markup=False)
    try:
        if me == "master":
            host = bind_address(plan, setup)
            err.print(f"distrun: waiting for {plan.nnodes - 1} other node(s) on "
                      f"{host or '*'}:{plan.master_port} (up to {ns.master_wait:.0f} s)",
                      highlight=False, markup=False)
            found = serve(plan.master_port, plan.nnodes - 1, facts, ns.master_wait, host=host,
                          key=key, on_refuse=lambda line: err.print(
                              f"distrun: refused a peer: {line}", highlight=False, markup=False))
        else:
            conn = probe_master(plan.master_addr, plan.master_port, ns.master_wait,
                                on_wait=lambda line: err.print(f"distrun: {line}",
                                                               highlight=False))
            found = join(conn, facts, ns.master_wait, where, key=key)
    except DistrunError as exc:
        err.print(f"distrun launch: preflight failed: {exc.one_line()}", highlight=False,
                  markup=False)
        return plan, exitcodes.PREFLIGHT
    return _verdict(plan, found, ns, err)


def _verdict(plan: LaunchPlan, found: list[Finding], ns: argparse.Namespace, err: Console
             ) -> tuple[LaunchPlan, int | None]:
    plan = plan.with_findings(found)
    render.findings(err, found)
    errors = [f for f in found if f.severity == "error"]
    if errors and not ns.force:
        err.print("distrun launch: refusing to start: the nodes disagree (fix it, or pass "
                  "--force on every node)", highlight=False)
        return plan, exitcodes.PREFLIGHT
    err.print(f"distrun: all {plan.nnodes} nodes joined; starting torchrun", highlight=False)
    return plan, None
