"""A matched line placed in the run (the unit the engine orders and groups)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    """A matched line placed in the run: which rule, which rank, when, where.

    ``strong``: matched a strong signature of the rule (not only a weak wording);
    ``derived``: inferred from other lines (watchdog dumps, the run record), not
    a signature of its own.
    """

    rule_id: str
    rank: int | None
    time: float | None
    file: str
    line: int
    text: str
    seq: int = 0
    strong: bool = True
    derived: bool = False
    node: str | None = None
    span: tuple[tuple[int, int], ...] = ()  # all the ranks its prefix names (srun's "tasks 2-7")

    def key(self) -> tuple[float, int, int]:
        """Ordering: by time; untimed lines by their position in their file."""
        return (self.time if self.time is not None else math.inf, self.line, self.seq)
