"""Calls distrun.init() and never shuts down; a handler registered first runs last at exit
and reports whether distrun tore the process group down before the interpreter's teardown."""

import atexit

import torch
import torch.distributed as dist


def report() -> None:
    print(f"at exit: process group initialised={dist.is_initialized()}", flush=True)


atexit.register(report)

import distrun  # noqa: E402

ctx = distrun.init()
x = torch.ones(1)
dist.all_reduce(x)
print(f"rank {ctx.rank} sum {x.item():.0f}", flush=True)
