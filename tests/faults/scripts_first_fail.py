"""Rank 1 raises at step 3; rank 0 then dies in the next collective (connection closed by
peer). torchelastic names rank 0; distrun must name rank 1."""

import time

import torch
import torch.distributed as dist

import distrun

ctx = distrun.init()
for step in range(1, 50):
    if ctx.rank == 1 and step == 3:
        raise KeyError("shape [/] mismatch at step 3")
    x = torch.ones(1)
    dist.all_reduce(x)
    print(f"rank {ctx.rank} step {step}", flush=True)
    time.sleep(0.05)
if ctx.rank == 0:  # rank 1 is gone; a collective ends rank 0 with a consequence
    time.sleep(0.5)
