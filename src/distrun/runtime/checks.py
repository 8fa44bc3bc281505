"""Checks at init, each raised before the vendor library throws its own, less clear, error."""

from __future__ import annotations

from collections.abc import Mapping

from distrun.accelerators.vendors import VENDORS
from distrun.cluster.base import RankFacts
from distrun.runtime.errors import InitError

VISIBILITY = {v.torch_device: v.visibility_var for v in VENDORS.values() if v.visibility_var}


def local_rank_fits(facts: RankFacts, device_type: str, count: int, env: Mapping[str, str]
                    ) -> None:
    """The `invalid device ordinal` case: LOCAL_RANK beyond the devices this node shows."""
    if device_type in ("cpu", "mps") or facts.local_rank < count:
        return
    var = VISIBILITY.get(device_type)
    shown = f" ({var}={env[var]})" if var and var in env else ""
    per_node = facts.local_world_size or "?"
    raise InitError(
        f"LOCAL_RANK={facts.local_rank} ({facts.environment}) but this node shows {count} "
        f"{device_type} device(s){shown}: {per_node} processes were started on a node with "
        f"{count}",
        f"at most {count} processes per node",
        f"start {count} processes per node (--nproc-per-node {count}) and set --nnodes to the "
        f"number of nodes, e.g. 2 nodes x {count} for {2 * count} ranks",
    )


def backend_available(backend: str) -> None:
    import torch.distributed as dist

    if dist.is_backend_available(backend):
        return
    raise InitError(f"backend {backend!r} is not available in this torch build",
                    "a backend this build has (gloo is always there)",
                    "pass backend='gloo', or install the vendor's torch extension")


def distinct_devices(bindings: list[tuple[str, str]]) -> None:
    """``bindings[rank] = (host, device)``: two ranks on one device of one host is an error."""
    seen: dict[tuple[str, str], int] = {}
    for rank, key in enumerate(bindings):
        if key[1] in ("cpu", "mps"):
            continue
        if key in seen:
            raise InitError(
                f"ranks {seen[key]} and {rank} are both bound to {key[1]} on {key[0]}",
                "one device per rank",
                "check LOCAL_RANK and the visible-device variable of each process; with "
                "distrun launch or torchrun, do not override them per process",
            )
        seen[key] = rank
