"""A few gloo collectives and a barrier on 2 CPU processes, for torchrun: a healthy run
with TORCH_DISTRIBUTED_DEBUG=DETAIL (whose collective fingerprinting is all it logs)."""

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, t)
    dist.barrier()
    if rank == 0:
        print(f"collectives: {world} processes, sum {t.item():.0f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
