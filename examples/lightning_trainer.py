"""Lightning Trainer under `distrun launch`, with distrun's heartbeat callback.

    distrun launch --nproc-per-node 2 examples/lightning_trainer.py

distrun.init() first binds the device with the vendor's API and makes the process group
(Lightning's DDP strategy finds it made and reuses it); the Trainer is told the same layout
(processes per node, nodes, backend) and the accelerator for this device: "cpu" on CPU, else
"auto" (never "gpu" on non-NVIDIA hardware). A tiny model learns from synthetic data.
"""

import os

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset

import distrun
from distrun.integrations.lightning import DistrunCallback


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)
        self.epoch_losses: list[list[float]] = []

    def on_train_epoch_start(self) -> None:
        self.epoch_losses.append([])

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.linear(x), y)
        self.epoch_losses[-1].append(loss.item())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    ctx = distrun.init()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    loader = DataLoader(TensorDataset(x, x @ torch.randn(8, 1, generator=gen)), batch_size=32,
                        shuffle=True)
    L.seed_everything(0, verbose=False)
    model = Regressor()
    trainer = L.Trainer(
        accelerator="cpu" if ctx.device.type == "cpu" else "auto", devices=per_node,
        num_nodes=ctx.world_size // per_node,
        strategy=DDPStrategy(process_group_backend=ctx.backend), max_epochs=4,
        callbacks=[DistrunCallback()], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, loader)
    first, last = (sum(e) / len(e) for e in (model.epoch_losses[0], model.epoch_losses[-1]))
    ctx.print(f"lightning_trainer: {trainer.world_size} ranks on {ctx.device.type} "
              f"({ctx.backend}): loss {first:.4f} -> {last:.4f}")
    distrun.shutdown()


if __name__ == "__main__":
    main()
