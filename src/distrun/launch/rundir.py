"""The launcher's side of the run directory: where it goes and what of the environment is kept.

The files themselves are written by ``distrun.model.rundir`` (shared with the runtime), the
records in them are typed by ``distrun.model.record``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from distrun.model.redact import REDACTED, redact_env
from distrun.model.rundir import RunDir, RunDirError, utc_now

__all__ = ["REDACTED", "RunDir", "RunDirError", "default_path", "redact", "utc_now"]


def default_path(name: str, root: str = "runs") -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / f"{stamp}-{name}"


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as stored in env.json: credentials out by name and by shape."""
    return redact_env(env)
