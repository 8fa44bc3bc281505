"""Training frameworks installed here (found through their package metadata: nothing is
imported) and their known hazards on this hardware."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping

from distrun.accelerators.inventory import NodeInventory
from distrun.model.plan import Finding

# distribution names, as pip knows them
FRAMEWORKS = ("transformers", "lightning", "pytorch-lightning", "accelerate", "mmengine",
              "deepspeed", "jax")
# device types whose set_device MMEngine's init_dist calls itself (else torch.cuda.set_device)
MMENGINE_DEVICES = ("cuda", "npu", "mlu", "musa")
JAX_MEMORY_VARS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                   "XLA_PYTHON_CLIENT_ALLOCATOR")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(lookup: Callable[[str], str | None] = _version) -> dict[str, str | None]:
    """Each framework's installed version, None when it is not installed."""
    return {name: lookup(name) for name in FRAMEWORKS}


def findings(found: Mapping[str, str | None], node: NodeInventory, nproc: int,
             env: Mapping[str, str]) -> list[Finding]:
    """Hazards of the installed frameworks on this node for a job of ``nproc`` processes."""
    out: list[Finding] = []
    device_type = node.info.torch_device
    mmengine = found.get("mmengine")
    if mmengine and device_type not in MMENGINE_DEVICES:
        out.append(Finding(
            id="framework-mmengine-cuda-init",
            severity="warning" if node.is_accelerated else "info",
            message=f"MMEngine {mmengine}: its init_dist(launcher='pytorch') calls "
                    f"torch.cuda.set_device, which fails on {device_type} ('Found no NVIDIA "
                    "driver' / \"no attribute '_cuda_setDevice'\"), and its Runner wraps the "
                    "model with CUDA device ids",
            fix="call distrun.integrations.mmengine.setup() before building the Runner and pass "
                "runner_args(ctx) (docs/frameworks.md#mmengine)"))
    jax = found.get("jax")
    if jax and node.is_accelerated and not any(env.get(v) for v in JAX_MEMORY_VARS):
        out.append(_jax_memory(jax, node, nproc))
    return out


def _jax_memory(jax: str, node: NodeInventory, nproc: int) -> Finding:
    per_device = -(-nproc // max(node.count, 1))
    fix = ("export XLA_PYTHON_CLIENT_PREALLOCATE=false (or XLA_PYTHON_CLIENT_MEM_FRACTION="
           f"{0.9 / max(per_device, 2):.2f} for {max(per_device, 2)} processes per device)")
    if per_device > 1:
        return Finding(id="framework-jax-preallocate", severity="warning",
                       message=f"JAX {jax}: each process takes 75% of its device's memory at "
                               f"start; {nproc} processes on {node.count} "
                               f"{node.info.torch_device} device(s) share devices: the second "
                               "one on a device runs out of memory", fix=fix)
    return Finding(id="framework-jax-preallocate", severity="info",
                   message=f"JAX {jax}: each process takes 75% of its device's memory at start; "
                           "fine with one process per device, not with several", fix=fix)
