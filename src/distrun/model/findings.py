"""One result type for preflight checks and for verification after start.

A ``Finding`` names what was checked (``id``), how bad it is (``severity``), what was seen
(``message``) and the exact fix. Preflight uses error / warning / info; verification after
start also reports ``ok`` (the check ran and passed, e.g. "2/2 ranks joined").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Severity = Literal["error", "warning", "info", "ok"]


class Finding(BaseModel):
    """One check's result. ``status`` is ``unknown`` when the check could not run."""

    model_config = ConfigDict(frozen=True)

    id: str
    severity: Severity
    message: str
    fix: str = ""
    status: Literal["failed", "unknown"] = "failed"
