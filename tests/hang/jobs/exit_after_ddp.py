"""Plain torch, the exit path of Lightning Fabric's example (issue 14): the last collective,
then ``destroy_process_group`` while DDP still holds the gloo group.

The race is forced (most runs, not every one): every thread of the rank on one CPU and gloo's worker
threads at SCHED_IDLE, so the main thread, woken by the barrier's completion, runs on before
the worker has freed the barrier's work (freeing it needs the GIL). Without distrun's settle
the worker is still holding it when the group is torn down: the Fabric example's rank blocked
for ever (the destructor joins the worker with the GIL held); here, with the group freed by
the interpreter's teardown, the process ends with ``terminate called without an active
exception`` (134) instead.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def pin_and_lower_gloo_worker() -> int:
    cpu = min(os.sched_getaffinity(0))
    lowered = 0
    for tid in map(int, os.listdir("/proc/self/task")):
        os.sched_setaffinity(tid, {cpu})
        with open(f"/proc/self/task/{tid}/comm", encoding="ascii") as fh:
            if fh.read().strip() == "pt_gloo_runloop":
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                lowered += 1
    return lowered


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    lowered = pin_and_lower_gloo_worker()
    model(torch.ones(2, 4)).sum().backward()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: destroyed (gloo workers lowered: {lowered})", file=sys.stderr,
          flush=True)


if __name__ == "__main__":
    main()
    print("exited main", file=sys.stderr, flush=True)
