"""A tiny gloo job for launch tests. Behaviour per rank from the environment:
JOB_FAIL_RANK raises, JOB_KILL_RANK SIGKILLs itself, JOB_CHILD_RANK starts a child in its own
session first, JOB_HANG makes every rank wait (for Ctrl-C tests)."""

import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.ones(1)
dist.all_reduce(x)
for i in range(3):
    print(f"rank {rank} line {i} sum {x.item():.0f}", flush=True)
print(f"rank {rank} stderr line", file=sys.stderr, flush=True)
if os.environ.get("JOB_CHILD_RANK") == str(rank):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                              os.environ.get("DISTRUN_TEST_MARK", "")], start_new_session=True)
    print(f"rank {rank} started child {child.pid}", flush=True)
dist.barrier()
if os.environ.get("JOB_HANG"):
    print(f"rank {rank} ready", flush=True)
    time.sleep(600)
if os.environ.get("JOB_FAIL_RANK") == str(rank):
    raise RuntimeError(f"boom on rank {rank}")
if os.environ.get("JOB_KILL_RANK") == str(rank):
    os.kill(os.getpid(), signal.SIGKILL)
if os.environ.get("JOB_FAIL_RANK") or os.environ.get("JOB_KILL_RANK"):
    time.sleep(600)  # the survivors wait; the launcher must stop them
dist.barrier()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
