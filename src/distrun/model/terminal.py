"""Terminal control sequences in text that came from a terminal (a remote ``ssh -tt``, a
coloured log): CSI (colours, cursor moves), OSC (titles, links) and two-byte escapes."""

from __future__ import annotations

import re

CONTROL = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_control(text: str) -> str:
    """``text`` without terminal control sequences."""
    return CONTROL.sub("", text) if "\x1b" in text else text
