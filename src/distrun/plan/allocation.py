"""Topology from the cluster allocation, when the user gave none: Slurm's one torchrun per node.

``srun --ntasks-per-node=1 distrun launch train.py`` inside an ``sbatch``/``salloc`` allocation:
each node's task reads the node count and its node rank (SLURM_NODEID) from Slurm, and the
master is the first node of the step's node list, on a port derived from the job id (so every
node agrees without talking). Pure: the environment is a mapping passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from distrun.cluster.base import ClusterEnvironment
from distrun.cluster.slurm import Slurm, SlurmAllocation, default_port, expand_nodes
from distrun.errors import UsageError
from distrun.model.invocation import Nnodes
from distrun.model.plan import Request


def has_topology(req: Request) -> bool:
    """True when the user said where this node sits (then the allocation is not consulted)."""
    return bool(req.nnodes or req.node_rank is not None or req.master_addr or req.rdzv_endpoint
                or req.standalone)


def step_tasks(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(tasks, nodes) of the srun step this process belongs to; None outside a step."""
    if "SLURM_STEP_ID" not in env:
        return None
    reader: ClusterEnvironment = Slurm(env)
    nodes = reader.integer("SLURM_STEP_NUM_NODES", len(expand_nodes(env)) or 1)
    tasks = reader.integer("SLURM_STEP_NUM_TASKS", reader.integer("SLURM_NTASKS", nodes))
    return tasks, nodes


def allocation_of(env: Mapping[str, str]) -> SlurmAllocation | None:
    """The allocation, with the step's node list when inside an srun step."""
    alloc = SlurmAllocation.from_env(env)
    if alloc is None:
        return None
    if "SLURM_STEP_ID" in env and env.get("SLURM_STEP_NODELIST"):
        alloc = replace(alloc, nodes=expand_nodes(env))
    return alloc


def from_slurm(req: Request, env: Mapping[str, str],
               address: Callable[[str], str] = str) -> tuple[Request, str | None]:
    """``req`` with nnodes, node rank and master taken from Slurm, and a note saying so.

    Unchanged outside an allocation, on a single node, or when the user gave topology flags.
    The master is MASTER_ADDR when set, else ``address(first node)`` (the launcher passes
    :func:`distrun.cluster.slurm.node_address`: a node name need not resolve).
    """
    alloc = allocation_of(env)
    if alloc is None or has_topology(req) or alloc.nnodes < 2:
        return req, None
    step = step_tasks(env)
    if step is not None and step[0] > step[1]:
        raise UsageError(
            f"distrun launch runs in an srun step of {step[0]} tasks on {step[1]} nodes: every "
            "task would start its own torchrun",
            "one distrun launch per node",
            "srun --ntasks-per-node=1 distrun launch ... (torchrun starts the processes per node)")
    port = req.master_port if req.master_port is not None else default_port(alloc.job_id)
    master = env.get("MASTER_ADDR") or address(alloc.master_addr)
    filled = replace(req, nnodes=Nnodes(alloc.nnodes, alloc.nnodes), node_rank=alloc.node_id,
                     master_addr=master, master_port=port)
    note = (f"Slurm job {alloc.job_id}: node {alloc.node_id} of {alloc.nnodes} "
            f"({','.join(alloc.nodes)}), master {master}:{port}")
    if step is None:
        note += ("; warning: not inside an srun step, so only this node runs distrun launch: "
                 "start it on every node with 'srun --ntasks-per-node=1 distrun launch ...'")
    return filled, note
