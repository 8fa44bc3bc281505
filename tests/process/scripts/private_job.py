"""A gloo job whose rank 1 fails under torchelastic's ``@record`` (the rank writes its
error.json under the run directory) after each rank wrote a file and a folder of its own in
the working directory: ``private_job.py MARKER``."""

import os
import sys

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    with open(f"user-file-{rank}.txt", "w") as out:
        out.write(sys.argv[1])
    os.mkdir(f"user-folder-{rank}")
    print(f"rank {rank} wrote its files", flush=True)
    dist.barrier()
    if rank == 1:
        raise ValueError("boom on rank 1")
    dist.barrier()


if __name__ == "__main__":
    main()
