"""What runs inside every rank that ``distrun launch`` starts, with no change to the script
(docs/instrument.md).

The launcher puts :data:`BOOT_DIR` first on the workers' ``PYTHONPATH``; its
``sitecustomize.py`` activates :mod:`distrun.instrument.agent` only in a process that
carries ``DISTRUN_INSTRUMENT=1`` and torchrun's ``RANK`` (never in the launcher, never in the
rank's own child processes), then hands over to any other ``sitecustomize`` on the path.
Layer: like the runtime, imports only ``distrun.model`` (and the standard library / torch).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_ON = "DISTRUN_INSTRUMENT"
ENV_OFF = "DISTRUN_NO_INSTRUMENT"
ENV_PID = "DISTRUN_INSTRUMENT_PID"
BOOT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")
PROGRESS_DIR = "progress"


def enabled(env: Mapping[str, str], no_instrument: bool = False) -> bool:
    """On unless ``--no-instrument`` or ``DISTRUN_NO_INSTRUMENT=1``."""
    return not no_instrument and env.get(ENV_OFF, "") not in ("1", "true", "yes")


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that turn instrumentation on in the workers: the boot directory first on
    ``PYTHONPATH`` (the user's entries kept after it)."""
    path = env.get("PYTHONPATH", "")
    parts = [p for p in path.split(os.pathsep) if p and p != BOOT_DIR]
    return {ENV_ON: "1", "PYTHONPATH": os.pathsep.join([BOOT_DIR, *parts])}


def progress_path(run_dir: str, rank: int) -> str:
    return os.path.join(run_dir, PROGRESS_DIR, f"rank-{rank}.json")
