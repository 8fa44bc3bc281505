"""A Hugging Face ``TrainerCallback`` that feeds distrun's heartbeat and progress.

    from distrun.integrations.huggingface import DistrunCallback
    trainer = Trainer(..., callbacks=[DistrunCallback()])

Every optimizer step reports ``state.global_step``: from the Trainer's log with its loss on a
logging step (``logging_steps``), else with the last loss logged.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from distrun.integrations._report import StepReporter, as_float


class DistrunCallback(TrainerCallback):  # type: ignore[misc,unused-ignore]
    def __init__(self) -> None:
        self._reporter = StepReporter()
        self._loss: float | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        loss = as_float((logs or {}).get("loss"))
        if loss is not None:
            self._loss = loss
            self._reporter.report(int(state.global_step), loss=loss)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if getattr(control, "should_log", False):  # on_log follows, with this step's loss
            return
        self._reporter.report(int(state.global_step), loss=self._loss)
