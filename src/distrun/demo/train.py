"""distrun's demo: a small real training run, one process per device (2 on CPU).

A two-layer network learns a fixed random teacher on deterministic synthetic data, with
DistributedDataParallel and a DistributedSampler. Rank 0 logs, checkpoints, and writes
``demo.json`` (world size, devices, steps per second, losses) into the run directory.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset

import distrun

FEATURES, HIDDEN, SAMPLES, EPOCHS, GLOBAL_BATCH = 32, 64, 4096, 4, 64


def dataset() -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=gen)
    teacher = torch.randn(FEATURES, 1, generator=gen)
    y = torch.tanh(x @ teacher) + 0.05 * torch.randn(SAMPLES, 1, generator=gen)
    return TensorDataset(x, y)


def mean_across_ranks(value: float, ctx: distrun.Context) -> float:
    t = torch.tensor([value], device=ctx.device)
    if ctx.distributed:
        dist.all_reduce(t)
    return float(t.item()) / ctx.world_size


def devices(ctx: distrun.Context) -> list[str]:
    names: list[object] = [None] * ctx.world_size
    if ctx.distributed:
        dist.all_gather_object(names, ctx.device)
    else:
        names = [ctx.device]
    return [str(n) for n in names]


def train(ctx: distrun.Context, run_dir: str) -> dict[str, object]:
    torch.manual_seed(0)
    data = dataset()
    sampler = ctx.sampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=ctx.batch_size(GLOBAL_BATCH), sampler=sampler)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))
    model = model.to(ctx.device)
    ddp = DistributedDataParallel(model) if ctx.distributed else model
    opt = torch.optim.Adam(ddp.parameters(), lr=3e-3)
    losses, steps, start = [], 0, time.perf_counter()
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            loss = nn.functional.mse_loss(ddp(x.to(ctx.device)), y.to(ctx.device))
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            total += loss.item()
            steps += 1
            ctx.step(steps, loss=loss.item())
        losses.append(mean_across_ranks(total / len(loader), ctx))
        ctx.print(f"epoch {epoch}: loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - start
    ctx.save(model.state_dict(), os.path.join(run_dir, "checkpoint.pt"))
    return {"world_size": ctx.world_size, "backend": ctx.backend, "devices": devices(ctx),
            "steps": steps, "steps_per_second": steps / elapsed, "losses": losses,
            "final_loss": losses[-1], "checkpoint": os.path.join(run_dir, "checkpoint.pt")}


def main() -> int:
    run_dir = os.environ.get("DISTRUN_RUN_DIR", ".")
    with distrun.init() as ctx:
        result = train(ctx, run_dir)
        if ctx.is_main:
            with open(os.path.join(run_dir, "demo.json"), "w", encoding="utf-8") as fh:
                json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
