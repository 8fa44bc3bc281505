"""A rank that takes its batch layout and [train] table from distrun launch."""

import json
import sys

import torch

import distrun

torch.set_num_threads(1)
ctx = distrun.init()
model = torch.nn.Linear(32, 32)


def step(batch: torch.Tensor) -> None:
    model(batch).square().mean().backward()


layout = ctx.plan_batch(step, lambda n: torch.randn(n, 32))
print("LAYOUT " + json.dumps({"rank": ctx.rank, "per_device": layout.per_device,
                              "accum": layout.grad_accum, "global": layout.global_batch,
                              "train": ctx.train, "marker": sys.argv[1]}), flush=True)
distrun.shutdown()
