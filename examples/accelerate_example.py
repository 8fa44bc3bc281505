"""Hugging Face accelerate under `distrun launch` (or `accelerate launch`).

    distrun launch --nproc-per-node 2 examples/accelerate_example.py

distrun.init() first (vendor binding, the process group; accelerate's state reuses a group
that exists), then Accelerator; ctx.step feeds the launcher's heartbeat. A tiny model learns
from synthetic data.
"""

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

import distrun


def main() -> None:
    ctx = distrun.init()
    accelerator = Accelerator(cpu=ctx.device.type == "cpu")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    loader = DataLoader(TensorDataset(x, x @ torch.randn(8, 1, generator=gen)), batch_size=32,
                        shuffle=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    losses, step = [], 0
    for _epoch in range(4):
        total = torch.zeros(1, device=accelerator.device)
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            accelerator.backward(loss)
            opt.step()
            step += 1
            ctx.step(step, loss=loss.item())
            total += loss.detach()
        losses.append(accelerator.reduce(total, reduction="mean").item() / len(loader))
    ctx.print(f"accelerate: {accelerator.num_processes} ranks on {accelerator.device.type} "
              f"({ctx.backend}): loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    accelerator.end_training()
    distrun.shutdown()


if __name__ == "__main__":
    main()
