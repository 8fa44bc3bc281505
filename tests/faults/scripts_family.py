"""A rank with a family: a child, a setsid child and a double-forked daemon, then it trains
(sleeps in a loop) until something ends it. Prints 'family ready <pids>' when all exist."""

import os
import subprocess
import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
mark = os.environ.get("DISTRUN_TEST_MARK", "")
sleeper = [sys.executable, "-c", "import time; time.sleep(600)", mark]
child = subprocess.Popen(sleeper)
detached = subprocess.Popen(sleeper, start_new_session=True)
read_end, write_end = os.pipe()
if os.fork() == 0:  # double fork: the grandchild is a daemon with no parent in the job
    os.setsid()
    if os.fork() == 0:
        os.close(read_end)
        os.write(write_end, str(os.getpid()).encode())
        os.close(write_end)
        os.execv(sys.executable, sleeper)
    os._exit(0)
os.close(write_end)
daemon = int(os.read(read_end, 32).decode())
print(f"family ready rank {rank} {child.pid} {detached.pid} {daemon}", flush=True)
dist.barrier()
while True:
    time.sleep(0.5)
