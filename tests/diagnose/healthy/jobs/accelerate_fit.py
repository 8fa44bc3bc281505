"""Plain Hugging Face accelerate training loop for `accelerate launch`: CPU, a few steps.

No distrun import: what `accelerate launch --cpu --num_processes 2` prints in a healthy run.
"""

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    accelerator = Accelerator(cpu=True)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=gen)
    loader = DataLoader(TensorDataset(x, x @ torch.randn(8, 1, generator=gen)), batch_size=32)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for step, (xb, yb) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        accelerator.print(f"step {step}: loss {loss.item():.4f}")
    accelerator.print(f"accelerate: {accelerator.num_processes} processes on "
                      f"{accelerator.device}, done")
    accelerator.end_training()


if __name__ == "__main__":
    main()
