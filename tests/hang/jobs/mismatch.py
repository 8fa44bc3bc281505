"""Plain torch: at the same collective, rank 0 all_reduces while rank 1 broadcasts."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(10)
dist.all_reduce(t)
if dist.get_rank() == 0:
    dist.all_reduce(t)
else:
    dist.broadcast(t, src=0)
print("never reached with gloo", flush=True)
