"""Slurm: a task started by ``srun`` (one process per task), and the allocation around it.

A process started by ``srun python train.py`` reads its rank from SLURM_PROCID; the
master is MASTER_ADDR when set, else the first node of the step's node list. A node *name*
need not be a host name (slurm.conf's NodeAddr is what Slurm itself connects to), so
:func:`node_address` turns a name that does not resolve into its NodeAddr. ``distrun launch``
inside an allocation (one torchrun per node, the sbatch pattern) reads :class:`SlurmAllocation`
instead.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import hostlist

from distrun.cluster.base import ClusterEnvError, ClusterEnvironment, RankFacts
from distrun.model.userfile import shown

# Variables Slurm sets for every task of a step (srun); the batch script has them too.
_TASK_VARS = ("SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS")
HOSTS_MAX = 100_000


def default_port(job_id: int) -> int:
    """A port every task of one job agrees on without talking: 10000-29999 from the job id."""
    return 10000 + job_id % 20000


def _range_size(part: str) -> int:
    lo, sep, hi = part.partition("-")
    if not sep:
        return 1
    if not (lo.isdigit() and hi.isdigit() and len(lo) <= 12 and len(hi) <= 12):
        return HOSTS_MAX + 1 if lo.isdigit() and hi.isdigit() else 1  # else: hostlist refuses
    return max(int(hi) - int(lo) + 1, 1)


def hostlist_size(value: str) -> int:
    """How many names a Slurm hostlist expands to, counted without expanding it (a bound)."""
    total = 0
    for item in re.split(r",(?![^\[]*\])", value):
        count = 1
        for group in re.findall(r"\[([^\[\]]*)\]", item):
            count *= sum(_range_size(p) for p in group.split(","))
            count = min(count, HOSTS_MAX + 1)
        total += count
    return total


def expand_hostlist(value: str, var: str) -> tuple[str, ...]:
    """The names in Slurm hostlist ``value`` (from ``var``), bounded to HOSTS_MAX names."""
    if len(value) > 1_000_000 or hostlist_size(value) > HOSTS_MAX:
        raise ClusterEnvError(f"slurm: node list {var}={shown(value)} names more than "
                              f"{HOSTS_MAX} nodes", "a Slurm hostlist such as n[0-3]",
                              f"check {var}")
    try:
        return tuple(hostlist.expand_hostlist(value)) if value else ()
    except (hostlist.BadHostlist, ValueError) as exc:
        raise ClusterEnvError(
            f"slurm: node list {var}={shown(value)} does not parse ({exc})",
            "a Slurm hostlist such as n[0-3]",
            f"check {var}",
        ) from None


def expand_nodes(env: Mapping[str, str]) -> tuple[str, ...]:
    var = "SLURM_STEP_NODELIST" if env.get("SLURM_STEP_NODELIST") else "SLURM_JOB_NODELIST"
    return expand_hostlist(env.get(var) or "", var)


def scontrol_node(name: str, env: Mapping[str, str]) -> str:
    """``scontrol -o show node NAME`` (one line); '' when scontrol fails or is missing."""
    try:
        done = subprocess.run(["scontrol", "-o", "show", "node", name], env=dict(env),
                              capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def resolves(host: str) -> bool:
    try:
        return bool(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except (socket.gaierror, UnicodeError):
        return False


def node_address(name: str, env: Mapping[str, str],
                 show: Callable[[str, Mapping[str, str]], str] = scontrol_node,
                 lookup: Callable[[str], bool] = resolves) -> str:
    """Where the other nodes reach Slurm node ``name``: the name when it resolves (the usual
    case, no scontrol call), else its NodeAddr from ``scontrol show node``. Has effects."""
    if lookup(name):
        return name
    m = re.search(r"\bNodeAddr=(\S+)", show(name, env))
    if m and m.group(1) != name:
        return m.group(1)
    raise ClusterEnvError(
        f"slurm: the master node name {name!r} does not resolve and scontrol names no other "
        "address for it",
        "a node name that resolves, or MASTER_ADDR",
        "export MASTER_ADDR=<address of the first node> in the job script, e.g. from "
        "'scontrol show node <node>' (its NodeAddr)",
    )


def reachable_master(facts: RankFacts, env: Mapping[str, str]) -> RankFacts:
    """An srun task's facts with a master address the other nodes can reach (see above)."""
    if (facts.environment != Slurm.name or facts.world_size < 2 or env.get("MASTER_ADDR")
            or not facts.master_addr):
        return facts
    return replace(facts, master_addr=node_address(facts.master_addr, env))


class Slurm(ClusterEnvironment):
    name = "slurm"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        return all(v in env for v in _TASK_VARS)

    def facts(self) -> RankFacts:
        nodes = expand_nodes(self.env)
        nnodes = self.size("SLURM_JOB_NUM_NODES", self.size("SLURM_NNODES", len(nodes) or 1))
        world = self.size("SLURM_NTASKS")
        return RankFacts(
            self.name,
            rank=self.integer("SLURM_PROCID"),
            world_size=world,
            local_rank=self.integer("SLURM_LOCALID", 0),
            local_world_size=self.optional_int("SLURM_NTASKS_PER_NODE", minimum=1)
            or self.optional_int("SLURM_STEP_TASKS_PER_NODE", minimum=1),
            node_rank=self.integer("SLURM_NODEID", 0),
            nnodes=nnodes,
            master_addr=self.env.get("MASTER_ADDR") or (nodes[0] if nodes else None),
            master_port=self.port("MASTER_PORT", default_port(self.integer("SLURM_JOB_ID"))),
        )


@dataclass(frozen=True)
class SlurmAllocation:
    """The allocation a batch script or an ``salloc`` shell runs in."""

    job_id: int
    nodes: tuple[str, ...]
    node_id: int
    gpus_on_node: int | None

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    @property
    def master_addr(self) -> str:
        return self.nodes[0]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SlurmAllocation | None:
        if "SLURM_JOB_ID" not in env or "SLURM_JOB_NODELIST" not in env:
            return None
        reader = Slurm(env)
        gpus = env.get("SLURM_GPUS_ON_NODE")
        return cls(
            job_id=reader.integer("SLURM_JOB_ID"),
            nodes=expand_hostlist(env["SLURM_JOB_NODELIST"], "SLURM_JOB_NODELIST"),
            node_id=reader.integer("SLURM_NODEID", 0),
            gpus_on_node=int(gpus) if gpus and gpus.isdigit() else None,
        )
