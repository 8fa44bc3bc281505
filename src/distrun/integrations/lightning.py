"""A Lightning ``Callback`` that feeds distrun's heartbeat and progress.

    from distrun.integrations.lightning import DistrunCallback
    trainer = L.Trainer(..., callbacks=[DistrunCallback()])

Every training batch reports ``trainer.global_step`` and the loss the step returned.
Works with ``lightning`` and with the older ``pytorch_lightning`` package.
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment,unused-ignore]

from distrun.integrations._report import StepReporter


class DistrunCallback(Callback):  # type: ignore[misc,unused-ignore]
    def __init__(self) -> None:
        super().__init__()
        self._reporter = StepReporter()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        self._reporter.report(int(trainer.global_step), loss=loss)
