"""Each rank prints, then fills the disk under the run directory (as a checkpoint would),
then keeps training (heartbeats, progress, collectives) on the full disk. DISTRUN_TEST_FAIL=1:
rank 1 then exits with status 3."""

import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

import distrun

ctx = distrun.init()
for i in range(5):
    print(f"rank {ctx.rank} before {i}", flush=True)
time.sleep(1.0)  # the launcher copies these lines into the rank log before the disk fills
dist.barrier()
filler = Path(os.environ["DISTRUN_RUN_DIR"]).parent / f"filler-{ctx.rank}"
try:
    with open(filler, "wb") as fh:
        while True:
            fh.write(b"x" * 4096)
            fh.flush()
except OSError:
    pass  # the script's own write; the disk is now full
dist.barrier()
for step in range(1, 30):
    x = torch.ones(1)
    dist.all_reduce(x)
    ctx.step(step, loss=1.0 / step)
if os.environ.get("DISTRUN_TEST_FAIL") == "1" and ctx.rank == 1:
    sys.exit(3)
