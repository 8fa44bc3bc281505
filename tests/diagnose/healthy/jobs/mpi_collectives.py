"""torch.distributed on gloo under Open MPI's mpirun: the rank and world size from mpirun's
environment (OMPI_COMM_WORLD_*), the store at MASTER_ADDR:MASTER_PORT. No distrun import."""

import os

import torch
import torch.distributed as dist


def main() -> None:
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    dist.barrier()
    print(f"mpi_collectives: rank {rank} of {world}, sum {t.item():.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
