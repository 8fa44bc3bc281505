"""Errors raised inside a training process by ``distrun.init()``."""

from __future__ import annotations

from distrun.errors import DistrunError


class InitError(DistrunError):
    """The process cannot join the job as configured; the message says why and the fix."""


class BatchSizeError(DistrunError):
    """No batch size fits, or the search was given impossible bounds."""
