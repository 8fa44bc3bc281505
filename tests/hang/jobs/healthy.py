"""Plain torch: a healthy job of about 8 s (CPU work and an all_reduce per step)."""

import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(100)
for _ in range(160):
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
    dist.all_reduce(t)
    time.sleep(0.02)
print(f"rank {dist.get_rank()} done", flush=True)
dist.destroy_process_group()
