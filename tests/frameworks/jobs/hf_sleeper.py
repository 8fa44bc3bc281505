"""An unchanged Hugging Face Trainer script (nothing from distrun): at step 3 rank 1 sleeps
before its step, so rank 0 waits in DDP's gradient all_reduce; then training goes on."""

import os
import sys
import tempfile
import time

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

SLEEP_S = float(sys.argv[1]) if len(sys.argv) > 1 else 25.0


class Regressor(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": torch.nn.functional.mse_loss(self.linear(x), labels)}


class SleepOnRank1(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == 3 and int(os.environ["RANK"]) == 1:
            time.sleep(SLEEP_S)


def main() -> None:
    x = torch.randn(256, 8, generator=torch.Generator().manual_seed(0))
    data = [{"x": x[i], "labels": x[i, :1]} for i in range(len(x))]
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=16,
                                 num_train_epochs=1, save_strategy="no", report_to=[],
                                 disable_tqdm=True, use_cpu=True, logging_steps=100)
        Trainer(model=Regressor(), args=args, train_dataset=data,
                callbacks=[SleepOnRank1()]).train()
    print(f"rank {os.environ['RANK']} trained", flush=True)


if __name__ == "__main__":
    main()
