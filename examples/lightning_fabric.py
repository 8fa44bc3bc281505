"""Lightning Fabric under `distrun launch`: your own loop, Fabric's device and DDP handling.

    distrun launch --nproc-per-node 2 examples/lightning_fabric.py

distrun.init() first (vendor binding, the process group; Fabric reuses it), then Fabric with
the same layout and backend; ctx.step feeds the launcher's heartbeat. A tiny model learns from
synthetic data.
"""

import os

import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset

import distrun


def main() -> None:
    ctx = distrun.init()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size))
    fabric = Fabric(accelerator="cpu" if ctx.device.type == "cpu" else "auto", devices=per_node,
                    num_nodes=ctx.world_size // per_node,
                    strategy=DDPStrategy(process_group_backend=ctx.backend))
    fabric.launch()
    fabric.seed_everything(0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    loader = fabric.setup_dataloaders(DataLoader(
        TensorDataset(x, x @ torch.randn(8, 1, generator=gen)), batch_size=32, shuffle=True))
    model = torch.nn.Linear(8, 1)
    model, opt = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.05))
    losses, step = [], 0
    for _epoch in range(4):
        total = torch.zeros(1, device=fabric.device)
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            fabric.backward(loss)
            opt.step()
            step += 1
            ctx.step(step, loss=loss.item())
            total += loss.detach()
        losses.append(fabric.all_reduce(total, reduce_op="mean").item() / len(loader))
    ctx.print(f"lightning_fabric: {fabric.world_size} ranks on {fabric.device.type} "
              f"({ctx.backend}): loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    fabric.barrier()  # leave together: no rank tears down while another still talks
    distrun.shutdown()


if __name__ == "__main__":
    main()
