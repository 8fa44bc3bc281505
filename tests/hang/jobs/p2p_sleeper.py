"""Plain torch, nothing from distrun: rank 1 sleeps SECONDS before its second send to rank 0,
while rank 0 waits in the matching recv."""

import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    seconds = float(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(5)
    dist.all_reduce(t)
    if rank == 0:
        dist.send(t, 1)
        dist.recv(t, 1)
        dist.recv(t, 1)  # p2p #2 from rank 1: waits here
    else:
        dist.recv(t, 0)
        dist.send(t, 0)
        time.sleep(seconds)
        dist.send(t, 0)
    dist.barrier()
    time.sleep(3)  # still running when the watcher's next look sees the hang resolved
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
