"""Terminals: control sequences in text that came from one (a remote ``ssh -tt``, a coloured
log: CSI colours and cursor moves, OSC titles and links, two-byte escapes), and writing to a
console that may go away. Best effort, never the job's fate."""

from __future__ import annotations

import re
from typing import IO

CONTROL = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_control(text: str) -> str:
    """``text`` without terminal control sequences."""
    return CONTROL.sub("", text) if "\x1b" in text else text


def to_console(console: IO[str] | None, text: str) -> IO[str] | None:
    """Write ``text`` to ``console`` and flush it; return the console, or None once it went
    away (``distrun launch ... | head``, a closed or hung-up terminal: EPIPE, EIO): the caller
    stops writing there, while the logs, the record and the job go on."""
    if console is None:
        return None
    try:
        console.write(text)
        console.flush()
    except (OSError, ValueError):
        return None
    return console
