"""Plain torch: rank 0 computes for SECONDS (an evaluation) while the others wait in a barrier."""

import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(10)
dist.all_reduce(t)
if dist.get_rank() == 0:
    end = time.monotonic() + float(sys.argv[1])
    x = 0
    while time.monotonic() < end:
        x += 1
dist.barrier()
dist.all_reduce(t)
print(f"rank {dist.get_rank()} done {t.sum().item():.0f}", flush=True)
dist.destroy_process_group()
