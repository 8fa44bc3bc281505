"""MMEngine's Runner under `distrun launch`, on CPU, CUDA or a non-CUDA vendor (report 02).

    distrun launch --nproc-per-node 2 examples/mmengine_runner.py

`setup()` is the one step: distrun.init() binds the device with the vendor's own
set_device and makes the process group, so the Runner skips MMEngine's CUDA-only init_dist;
`runner_args()` gives the launcher, the backend and a model wrapper that works off CUDA.
A tiny linear model (built in code) learns from synthetic data.
"""

import tempfile

import torch
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import TensorDataset

from distrun.integrations import mmengine as dr_mmengine


class Regressor(BaseModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)

    def forward(self, x, y, mode="tensor"):  # type: ignore[no-untyped-def]
        out = self.linear(x)
        if mode == "loss":
            return {"loss": torch.nn.functional.mse_loss(out, y)}
        return out


class EpochLoss(Hook):
    """Mean loss of each epoch, to show that it falls."""

    def __init__(self) -> None:
        self.epochs: list[list[float]] = []

    def before_train_epoch(self, runner) -> None:  # type: ignore[no-untyped-def]
        self.epochs.append([])

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):  # type: ignore[no-untyped-def]
        self.epochs[-1].append(outputs["loss"].item())


def main() -> None:
    ctx = dr_mmengine.setup()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    data = TensorDataset(x, x @ torch.randn(8, 1, generator=gen))
    epoch_loss = EpochLoss()
    with tempfile.TemporaryDirectory() as work_dir:
        runner = Runner(
            model=Regressor(), work_dir=work_dir, experiment_name="distrun-example",
            train_dataloader=dict(dataset=data, batch_size=32,
                                  sampler=dict(type="DefaultSampler", shuffle=True),
                                  collate_fn=dict(type="default_collate")),
            train_cfg=dict(by_epoch=True, max_epochs=4),
            optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.05)),
            default_hooks=dict(checkpoint=None),
            custom_hooks=[epoch_loss, dr_mmengine.DistrunHook()],
            randomness=dict(seed=0), **dr_mmengine.runner_args(ctx))
        runner.train()
    first, last = (sum(e) / len(e) for e in (epoch_loss.epochs[0], epoch_loss.epochs[-1]))
    ctx.print(f"mmengine: {ctx.world_size} ranks on {ctx.device.type} "
              f"({ctx.backend}): loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
