"""Plain torch, nothing from distrun: rank SLEEPER sleeps SECONDS before the 4th all_reduce."""

import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    sleeper, seconds = int(sys.argv[1]), float(sys.argv[2])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1000)
    for _ in range(3):
        dist.all_reduce(t)
    if rank == sleeper:
        time.sleep(seconds)
    dist.all_reduce(t)
    time.sleep(3)  # still running when the watcher's next look sees the hang resolved
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
