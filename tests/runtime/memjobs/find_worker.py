"""One rank of the batch-size search under its own memory ceiling (RLIMIT_AS).

``find_worker.py OUT_DIR job``: under torchrun; rank r's ceiling is CEILINGS_MB[r] above its
address-space size after warm-up; finds the agreed size, then runs 3 steps at it.
``find_worker.py OUT_DIR reference MB``: one process, a direct bisection (to 1 sample) of the
largest size that fits under MB.
"""

import json
import os
import resource
import sys

import torch

from distrun.model.oom import proc_kib

torch.set_num_threads(1)
torch.backends.mkldnn.enabled = False  # oneDNN reports a failed allocation as "could not create a primitive"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 64))
opt = torch.optim.AdamW(model.parameters())


def step(batch: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    model(batch).square().mean().backward()
    opt.step()


def make(n: int) -> torch.Tensor:
    return torch.randn(n, 64)


def vm_bytes() -> int:
    return proc_kib("VmSize") * 1024


def ceiling(mb: int) -> None:
    step(make(8))  # warm-up: gradients and optimizer state exist before the limit
    limit = vm_bytes() + mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def _runs(n: int) -> bool:
    from distrun.runtime.batchfind import is_oom

    try:
        step(make(n))
    except (RuntimeError, MemoryError) as err:
        if not is_oom(err):
            raise
        return False
    return True


def fits(n: int) -> bool:
    """One step at n; memory freed after the exception (and its frames) are gone."""
    from distrun.runtime.memory import free_memory

    ok = _runs(n)
    free_memory("cpu")
    return ok


def reference(mb: int | None) -> int:
    """The exact largest size that fits (doubling, then bisection to one sample)."""
    if mb is not None:
        ceiling(mb)
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def job(out: str) -> None:
    import distrun
    from distrun.runtime import batchfind

    ctx = distrun.init()
    ceiling([int(x) for x in os.environ["CEILINGS_MB"].split(",")][ctx.rank])
    found = batchfind.find(ctx.device, ctx.world_size, step, make, start=8, maximum=100000,
                           model=model, rank=ctx.rank)
    ran = all(fits(found.size) for _ in range(3))
    ref = reference(None) if os.environ.get("REFERENCE_RANK") == str(ctx.rank) else None
    with open(os.path.join(out, f"rank{ctx.rank}.json"), "w") as fh:
        json.dump({"size": found.size, "trials": found.trials, "ran": ran, "reference": ref,
                   "cached": found.started_from_cache, "api": ctx.find_batch_size.__name__}, fh)
    distrun.shutdown()


if __name__ == "__main__":
    if sys.argv[2] == "reference":
        with open(os.path.join(sys.argv[1], "reference.json"), "w") as fh:
            json.dump({"size": reference(int(sys.argv[3]))}, fh)
    else:
        job(sys.argv[1])
