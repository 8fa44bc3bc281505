"""Two gloo ranks, 600 pairs of back-to-back all_reduces: after each pair, how often the plain
status read and the exit's read show a collective in flight that has returned."""

import torch
import torch.distributed as dist

from distrun.instrument import flight

dist.init_process_group("gloo")
t = torch.ones(10)
plain_busy = last_busy = 0
for i in range(600):
    dist.all_reduce(t)
    dist.all_reduce(t)
    if i % 2:
        plain_busy += any(c.enqueued > c.completed
                          for c in flight.parse_status(flight.status_raw()).values())
    else:
        last_busy += any(c.enqueued > c.completed for c in flight.last_counters(0.5).values())
print(f"rank {dist.get_rank()} plain_busy={plain_busy} last_busy={last_busy}", flush=True)
dist.destroy_process_group()
