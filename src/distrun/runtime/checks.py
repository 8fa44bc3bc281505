"""Checks at init, each raised before the vendor library throws its own, less clear, error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distrun.accelerators.vendors import SHARED_DEVICE_TYPES, VENDORS
from distrun.cluster.base import RankFacts
from distrun.runtime.errors import InitError

# torch device type -> visibility variables of every vendor using it (cuda: NVIDIA, then AMD)
VISIBILITY: dict[str, tuple[str, ...]] = {}
for _vendor in VENDORS.values():
    VISIBILITY[_vendor.torch_device] = (VISIBILITY.get(_vendor.torch_device, ())
                                        + _vendor.visibility_vars)

# environment -> (the variable that carries the local rank, the launcher setting behind it)
LOCAL_RANK_SOURCE: dict[str, tuple[str, str]] = {
    "torchelastic": ("LOCAL_RANK", "--nproc-per-node {n} (distrun launch / torchrun)"),
    "manual": ("LOCAL_RANK", "the LOCAL_RANK you export per process"),
    "mpi": ("OMPI_COMM_WORLD_LOCAL_RANK", "mpirun --map-by ppr:{n}:node"),
    "slurm": ("SLURM_LOCALID", "srun --ntasks-per-node {n} (or --gpus-per-task 1)"),
    "lsf": ("JSM_NAMESPACE_LOCAL_RANK", "jsrun --rs_per_host / --tasks_per_rs"),
    "kubeflow": ("LOCAL_RANK", "one process per pod"),
}


def visible_setting(device_type: str, env: Mapping[str, str]) -> str:
    """`` (CUDA_VISIBLE_DEVICES=0,1)`` when the vendor's visibility variable is set, else ''."""
    for var in VISIBILITY.get(device_type, ()):
        if var in env:
            return f" ({var}={env[var]})"
    return ""


def local_rank_fits(facts: RankFacts, device_type: str, count: int, env: Mapping[str, str]
                    ) -> None:
    """The `invalid device ordinal` case: a local rank beyond the devices this node shows."""
    if device_type in SHARED_DEVICE_TYPES or facts.local_rank < count:
        return
    var, setting = LOCAL_RANK_SOURCE.get(facts.environment, ("LOCAL_RANK", "processes per node"))
    started = (f"{facts.local_world_size} processes were started on this node"
               if facts.local_world_size else "more processes than devices were started here")
    declared = " (declared by DISTRUN_INVENTORY)" if env.get("DISTRUN_INVENTORY") else ""
    raise InitError(
        f"{var}={facts.local_rank} (rank {facts.rank}, started by {facts.environment}) but this "
        f"node shows {count} {device_type} device(s){declared}{visible_setting(device_type, env)}"
        f": {started}; {device_type}:{facts.local_rank} would fail as an invalid device ordinal",
        f"local ranks 0..{max(count - 1, 0)}, at most {count} processes per node",
        f"start {count} processes per node ({setting.format(n=count)}) and spread the "
        f"rest over more nodes, e.g. 2 nodes x {count} for {2 * count} ranks; or make all "
        "devices visible to every process of the node",
    )


def shared_device(first: int, second: int, host: str, device: str) -> InitError:
    """The error for ranks ``first`` and ``second`` both bound to ``device`` on ``host``."""
    return InitError(
        f"ranks {first} and {second} are both bound to {device} on {host}",
        "one device per rank",
        "give each process of a node its own LOCAL_RANK (0, 1, ...) and the same "
        "visible-device list; with distrun launch or torchrun, do not override "
        "LOCAL_RANK or the visible-device variable per process",
    )


def distinct_devices(bindings: Sequence[tuple[str, str]]) -> None:
    """``bindings[rank] = (host, device)``: two ranks on one device of one host is an error."""
    seen: dict[tuple[str, str], int] = {}
    for rank, key in enumerate(bindings):
        if key[1] in SHARED_DEVICE_TYPES:
            continue
        if key in seen:
            raise shared_device(seen[key], rank, *key)
        seen[key] = rank
