"""The launcher's side of the run directory: where it goes and what of the environment is kept.

The files themselves are written by ``distrun.model.rundir`` (shared with the runtime), the
records in them are typed by ``distrun.model.record``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from distrun.model.rundir import RunDir, RunDirError, utc_now

__all__ = ["REDACTED", "SECRET", "RunDir", "RunDirError", "default_path", "redact", "utc_now"]

SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|"
                    r"ACCESS_KEY|SESSION", re.IGNORECASE)
REDACTED = "<redacted>"


def default_path(name: str, root: str = "runs") -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / f"{stamp}-{name}"


def redact(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if SECRET.search(k) else v) for k, v in sorted(env.items())}
