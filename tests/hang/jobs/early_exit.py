"""Plain torch: rank 1 leaves with exit status 0 while rank 0 goes on to the next all_reduce."""

import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(10)
dist.all_reduce(t)
if dist.get_rank() == 1:
    print("rank 1 leaves early", flush=True)
    sys.exit(0)
dist.all_reduce(t)
