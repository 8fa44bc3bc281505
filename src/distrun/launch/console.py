"""The launcher's copy of the job's output on its console: best effort, never the job's fate."""

from __future__ import annotations

from typing import IO


def to_console(console: IO[str] | None, text: str) -> IO[str] | None:
    """Write ``text`` to ``console`` and flush it; return the console, or None once it went
    away (``distrun launch ... | head``, a closed terminal): the caller stops copying, while
    the rank logs and the job go on."""
    if console is None:
        return None
    try:
        console.write(text)
        console.flush()
    except (OSError, ValueError):
        return None
    return console
