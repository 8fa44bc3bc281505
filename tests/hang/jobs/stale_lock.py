"""Plain torch, nothing from distrun: after one all_reduce every rank waits for the lock of a
JIT extension build, as DeepSpeed's op builder does through torch.utils.cpp_extension; the lock
file LOCK was left behind by a build that was killed, so nobody ever releases it."""

import sys

import torch
import torch.distributed as dist
from torch.utils.file_baton import FileBaton


def main() -> None:
    dist.init_process_group("gloo")
    t = torch.ones(10)
    dist.all_reduce(t)
    baton = FileBaton(sys.argv[1])
    if baton.try_acquire():  # the stale lock is there: never taken, waited for
        baton.release()
    else:
        baton.wait()
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
