"""``distrun.init(framework="jax")``: the same launcher facts drive ``jax.distributed.initialize``.

coordinator address = MASTER_ADDR (or what the launcher names as master) and a port: the
launcher's MASTER_PORT, except under torchrun / ``distrun launch``, whose agent already
listens there (MASTER_PORT + 1 then); DISTRUN_COORDINATOR_PORT overrides both.
process count = world size; process id = rank; on NVIDIA / ROCm one local device per process
(``local_device_ids=[local_rank]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distrun.cluster.base import RankFacts
from distrun.runtime.errors import InitError


def coordinator(facts: RankFacts, env: Mapping[str, str]) -> str:
    """``host:port`` of the JAX coordinator (rank 0's), from the launcher's facts."""
    if not facts.master_addr or not (facts.master_port or env.get("DISTRUN_COORDINATOR_PORT")):
        raise InitError(
            f"{facts.environment}: no coordinator for JAX process {facts.rank} of "
            f"{facts.world_size} (MASTER_ADDR={facts.master_addr}, "
            f"MASTER_PORT={facts.master_port})",
            "MASTER_ADDR and MASTER_PORT in every process's environment",
            "export MASTER_ADDR=<host of rank 0> MASTER_PORT=<free port>, or start with "
            "distrun launch")
    port = env.get("DISTRUN_COORDINATOR_PORT")
    if not port:
        shift = 1 if facts.environment == "torchelastic" else 0
        port = str(int(facts.master_port or 0) + shift)
    host = f"[{facts.master_addr}]" if ":" in facts.master_addr else facts.master_addr
    return f"{host}:{port}"


def initialize_args(facts: RankFacts, env: Mapping[str, str], device_type: str,
                    timeout_s: float) -> dict[str, Any]:
    """The keyword arguments for ``jax.distributed.initialize`` (pure; tested on env dicts)."""
    args: dict[str, Any] = {
        "coordinator_address": coordinator(facts, env),
        "num_processes": facts.world_size,
        "process_id": facts.rank,
        "initialization_timeout": max(1, int(timeout_s)),
    }
    if device_type == "cuda":
        args["local_device_ids"] = [facts.local_rank]
    return args


MEMORY_VARS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
               "XLA_PYTHON_CLIENT_ALLOCATOR")


def memory_advice(facts: RankFacts, env: Mapping[str, str], device_type: str, devices: int
                  ) -> str | None:
    """The advice when this node's processes share accelerators under JAX's preallocation."""
    local = facts.local_world_size or 1
    if device_type == "cpu" or devices < 1 or local <= devices or \
            any(env.get(v) for v in MEMORY_VARS):
        return None
    share = -(-local // devices)
    return (f"{local} JAX processes on {devices} {device_type} device(s) of this node: each "
            "takes 75% of its device's memory at start, so the second on a device runs out; "
            "set XLA_PYTHON_CLIENT_PREALLOCATE=false (or XLA_PYTHON_CLIENT_MEM_FRACTION="
            f"{0.9 / share:.2f}) before starting")


def initialize(facts: RankFacts, env: Mapping[str, str], device_type: str, timeout_s: float
               ) -> Any:
    """Join the JAX job (when there is more than one process); this process's first device
    (a ``jax.Device``)."""
    import jax

    if facts.world_size > 1:
        jax.distributed.initialize(**initialize_args(facts, env, device_type, timeout_s))
    return jax.local_devices()[0]


def device_name(device: Any) -> str:
    """``platform:index`` of a JAX device on its own host: ``cpu:0``, ``cuda:3``.

    ``Device.id`` is global across the job (process 1's first CPU device is id 2048), so the
    host-local ``local_hardware_id`` names it; a device without one (a CPU device in some
    versions) is named by its place among this process's devices.
    """
    local = getattr(device, "local_hardware_id", None)
    if local is None:
        import jax

        local = jax.local_devices().index(device)
    return f"{device.platform}:{local}"


def barrier(name: str) -> None:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def shutdown() -> None:
    import sys

    if "jax" in sys.modules:
        import jax

        jax.distributed.shutdown()  # type: ignore[no-untyped-call]
