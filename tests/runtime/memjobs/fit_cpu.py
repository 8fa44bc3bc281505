"""Fit peak memory at batch 64/128/256 on CPU, then measure the real peak at 1024."""

import json
import sys

import torch

from distrun.runtime.context import Context
from distrun.runtime.memory import PeakCounter, measure_peak

torch.manual_seed(0)
torch.set_num_threads(1)
# Wide, cheap activations: the batch-dependent part (~0.25 MiB a sample) is tens of MiB at the
# fitted sizes, far above the few MiB of noise in the process's RSS high-water mark.
model = torch.nn.Sequential(torch.nn.Linear(32, 16384), torch.nn.GELU(), torch.nn.Tanh(),
                            torch.nn.GELU(), torch.nn.Linear(16384, 10))
opt = torch.optim.AdamW(model.parameters())


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, y = batch
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def make(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 32), torch.randint(0, 10, (n,))


ctx = Context(0, 0, 1, 0, "cpu", None, "single")
fit = ctx.estimate_memory(step, make, sizes=(64, 128, 256))
target = int(sys.argv[1])
real = measure_peak(PeakCounter("cpu"), step, make, target)
print(json.dumps({"predicted": fit.predict(target), "real": real, "intercept": fit.intercept,
                  "slope": fit.slope}))
