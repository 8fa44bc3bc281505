"""The run directory: plan, redacted environment, per-rank logs, events, summary.

Layout (docs/run-directory.md)::

    <run>/plan.json  env.json  events.jsonl  summary.json
    <run>/logs/rank-<R>.log       "<ISO-8601 UTC> <out|err> <text>" per line
    <run>/logs/launcher.log       the launcher's own log
    <run>/torchrun/...            torchrun's raw per-attempt logs and error.json files
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE|CREDENTIAL|AUTH|COOKIE|"
                    r"ACCESS_KEY|SESSION", re.IGNORECASE)
REDACTED = "<redacted>"


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_path(name: str, root: str = "runs") -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / f"{stamp}-{name}"


def redact(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if SECRET.search(k) else v) for k, v in sorted(env.items())}


class RunDir:
    """One launcher's record of one job. Every write is flushed as it happens."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.logs = path / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._events = open(path / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def write_json(self, name: str, data: Any) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, self.path / name)

    def event(self, name: str, **fields: Any) -> None:
        line = json.dumps({"time": utc_now(), "event": name, **fields}, default=str)
        with self._lock:
            self._events.write(line + "\n")
            self._events.flush()

    def rank_log(self, rank: int) -> Path:
        return self.logs / f"rank-{rank}.log"

    def close(self) -> None:
        with self._lock:
            self._events.close()
