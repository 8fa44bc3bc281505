"""A tiny training process for the runtime tests: init, one collective, steps, a checkpoint.

Usage: worker.py OUT_DIR [MARK]. Writes OUT_DIR/rank-<R>.json with what the context says.
WORKER_FRAMEWORK=jax uses JAX; WORKER_BACKEND passes a backend; WORKER_RECORD_CUDA=1 records
every torch.cuda function called (and who called it). An InitError exits 3 with its text.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

CUDA_CALLS: list[dict[str, object]] = []


def record_cuda() -> None:
    import torch
    import torch.cuda

    def wrap(name: str, fn):  # type: ignore[no-untyped-def]
        def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
            stack = [f"{f.filename}:{f.lineno}" for f in traceback.extract_stack()[:-1]]
            CUDA_CALLS.append({"call": f"torch.cuda.{name}", "stack": stack})
            return fn(*args, **kwargs)
        return recorded

    for name in dir(torch.cuda):
        fn = getattr(torch.cuda, name)
        if callable(fn) and not isinstance(fn, type) and not name.startswith("__"):
            setattr(torch.cuda, name, wrap(name, fn))


def run_torch(ctx, out: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(ctx.rank + 1)])
    out["device_type"] = ctx.device.type  # a torch.device, as Accelerator.device is
    if ctx.distributed:
        dist.all_reduce(t)
    out["sum"] = float(t.item())


def run_jax(ctx, out: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    out["process_count"] = jax.process_count()
    out["process_index"] = jax.process_index()
    gathered = multihost_utils.process_allgather(jnp.array([ctx.rank + 1.0]))
    out["sum"] = float(gathered.sum())


def main() -> int:
    out_dir = sys.argv[1]
    if os.environ.get("WORKER_RECORD_CUDA") == "1":
        record_cuda()
    import distrun

    framework = os.environ.get("WORKER_FRAMEWORK", "torch")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            ctx = distrun.init(backend=os.environ.get("WORKER_BACKEND") or None,
                               framework=framework, timeout_s=60)
        except distrun.InitError as err:
            print(f"InitError: {err}", file=sys.stderr)
            return 3
    out: dict[str, object] = {
        "rank": ctx.rank, "local_rank": ctx.local_rank, "world_size": ctx.world_size,
        "node_rank": ctx.node_rank, "device": ctx.device_name,
        "device_class": f"{type(ctx.device).__module__}.{type(ctx.device).__name__}",
        "backend": ctx.backend,
        "environment": ctx.environment, "is_main": ctx.is_main,
        "warnings": [str(w.message) for w in seen],
    }
    with ctx:
        (run_jax if framework == "jax" else run_torch)(ctx, out)
        for step in range(1, 4):
            ctx.step(step, loss=1.0 / step)
        ctx.save({"rank": ctx.rank, "world": ctx.world_size}, os.path.join(out_dir, "ckpt.pt"))
        out["ckpt_seen"] = os.path.exists(os.path.join(out_dir, "ckpt.pt"))
        ctx.logger.info("rank %d done", ctx.rank)
        ctx.print(f"main says hello from rank {ctx.rank}")
    out["cuda_calls"] = CUDA_CALLS
    with open(os.path.join(out_dir, f"rank-{out['rank']}.json"), "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
