"""A rank that runs out of host memory for real, under distrun launch (gloo, CPU).

``oom_job.py MARK``: every rank measures its step's memory at three small batches
(``ctx.estimate_memory``) unless OOM_FIT=0, takes its batch from distrun launch
(``ctx.batch_size()``); rank OOM_RANK then caps its address space (RLIMIT_AS) at its size now
plus OOM_ROOM_MB and runs the step at that batch, which raises torch's
``DefaultCPUAllocator: can't allocate memory``. The other ranks wait at a barrier.
"""

import os
import resource

import torch

import distrun
from distrun.model.oom import proc_kib

torch.set_num_threads(1)
torch.backends.mkldnn.enabled = False  # oneDNN reports a failed allocation otherwise
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(batch: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    model(batch).square().mean().backward()
    opt.step()


def make(n: int) -> torch.Tensor:
    return torch.randn(n, 64)


def vm_bytes() -> int:
    return proc_kib("VmSize") * 1024


ctx = distrun.init()
if os.environ.get("OOM_FIT", "1") == "1":
    fit = ctx.estimate_memory(step, make, sizes=(256, 512, 1024))
    print(f"rank {ctx.rank} fit {fit.intercept:.0f} + {fit.slope:.0f} per sample", flush=True)
batch = ctx.batch_size()
if ctx.rank == int(os.environ.get("OOM_RANK", "1")):
    room = int(os.environ.get("OOM_ROOM_MB", "48")) * 2**20
    soft = vm_bytes() + room
    resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
    step(make(batch))
ctx.barrier()
distrun.shutdown()
