"""A gloo job where one rank stops before a collective: ``hang.py HANG_RANK HANG_STEP``."""

import sys
import time

import torch
import torch.distributed as dist

import distrun

hang_rank, hang_step = int(sys.argv[1]), int(sys.argv[2])
ctx = distrun.init()
for step in range(1, 100_000):
    ctx.step(step, loss=1.0 / step)
    if ctx.rank == hang_rank and step == hang_step:
        time.sleep(3600)
    t = torch.ones(1)
    dist.all_reduce(t)
    time.sleep(0.05)
