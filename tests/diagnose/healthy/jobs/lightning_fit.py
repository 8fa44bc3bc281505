"""Plain Lightning Trainer fit, Lightning's own launcher: 2 CPU processes, ddp, a few steps.

Every Trainer default kept (progress bar, model summary, logger), so the capture shows what a
user of Lightning sees in a healthy run. No distrun import.
"""

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.linear(x), y)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=gen)
    loader = DataLoader(TensorDataset(x, x @ torch.randn(8, 1, generator=gen)), batch_size=32)
    L.seed_everything(0)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=4)
    trainer.fit(Regressor(), loader)


if __name__ == "__main__":
    main()
