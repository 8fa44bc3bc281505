"""Plain torch, run with -m: what the script sees is what it would see without distrun."""

import os
import sys

import torch.distributed as dist

dist.init_process_group("gloo")
print(f"name={__name__} argv={sys.argv[1:]} spec={__spec__.name} "
      f"custom={os.environ.get('USER_SITECUSTOMIZE_RAN', 'no')}", flush=True)
dist.barrier()
if dist.get_rank() == 1:
    raise ValueError("user error on rank 1")
dist.destroy_process_group()
