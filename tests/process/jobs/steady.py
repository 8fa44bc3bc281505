"""A healthy gloo job of about 5 s: some CPU work, an all_reduce and ctx.step per step."""

import time

import torch
import torch.distributed as dist

import distrun

with distrun.init() as ctx:
    for step in range(1, 101):
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass
        t = torch.ones(1)
        dist.all_reduce(t)
        ctx.step(step, loss=1.0 / step + 0.01 * ctx.rank)
        time.sleep(0.03)
