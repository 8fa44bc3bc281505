"""Hugging Face Trainer under `distrun launch`, with distrun's heartbeat callback.

    distrun launch --nproc-per-node 2 examples/hf_trainer.py

distrun.init() first binds the device with the vendor's own API and makes the process group
(the Trainer's accelerate state reuses it); DistrunCallback feeds the launcher's heartbeat and
progress. A tiny model built in code (any nn.Module whose forward returns a "loss") learns
from synthetic data; nothing is downloaded.
"""

import tempfile

import torch
from transformers import Trainer, TrainingArguments

import distrun
from distrun.integrations.huggingface import DistrunCallback


class Regressor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.mse_loss(self.linear(x), labels)}


def main() -> None:
    ctx = distrun.init()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    y = x @ torch.randn(8, 1, generator=gen)
    data = [{"x": x[i], "labels": y[i]} for i in range(len(x))]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=32,
                                 num_train_epochs=4, learning_rate=0.05, optim="sgd",
                                 lr_scheduler_type="constant", max_grad_norm=0.0,
                                 logging_steps=1,
                                 save_strategy="no", report_to=[], disable_tqdm=True,
                                 use_cpu=ctx.device.type == "cpu", seed=0)
        trainer = Trainer(model=Regressor(), args=args, train_dataset=data,
                          callbacks=[DistrunCallback()])
        trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    ctx.print(f"hf_trainer: {ctx.world_size} ranks on {trainer.args.device.type} "
              f"({ctx.backend}): loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    distrun.shutdown()


if __name__ == "__main__":
    main()
