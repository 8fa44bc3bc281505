"""Steps from a framework's callback to the launcher: through ``distrun.init()``'s context when
the script made one, else through a heartbeat of this callback's own (the framework made the
process group itself; ``distrun launch`` still named the run directory)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from distrun.runtime import context
from distrun.runtime.heartbeat import Heartbeat


class StepReporter:
    """``report(step, loss=...)``: ``ctx.step`` of the current context, or the same record."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if env is None else env
        self._own: Heartbeat | None = None
        self._opened = False

    def report(self, step: int, **metrics: Any) -> None:
        values = {k: v for k, v in ((k, as_float(v)) for k, v in metrics.items())
                  if v is not None}
        ctx = context.current()
        if ctx is not None:
            ctx.step(step, **values)
            return
        heartbeat = self._heartbeat()
        if heartbeat is not None:
            heartbeat.beat(step, values)

    def _heartbeat(self) -> Heartbeat | None:
        if not self._opened:
            self._opened = True
            rank = self._env.get("RANK", "0")
            self._own = Heartbeat.from_env(self._env, int(rank) if rank.isdigit() else 0)
        return self._own


def as_float(value: Any) -> float | None:
    """A loss as a float: a number, its text, or a one-element tensor (``.item()``); else None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float, str)):
        try:
            return float(value)
        except ValueError:
            return None
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "numel", lambda: 0)() == 1:
        return float(item())
    return None
