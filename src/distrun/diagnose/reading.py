"""Opening what the user points diagnose at: refuse what is not a text log, read what is.

``check_path`` turns a path that cannot be a log (missing, a FIFO or device, a binary
file, a directory without logs) into one :class:`InputError` line for the CLI, before
anything is read: a FIFO is never opened, ``/dev/zero`` never read. ``open_log`` gives
the bytes of a log as UTF-8 (UTF-16 logs with a byte-order mark re-encoded).
"""

from __future__ import annotations

import io
import stat
from pathlib import Path

from distrun.diagnose.normalize import unwrap
from distrun.diagnose.sources import LOG_SUFFIXES, log_files

SNIFF_BYTES = 64 * 1024
UTF16_MAX_BYTES = 256 << 20
UNWRAP_MAX_BYTES = 1 << 20  # a pasted excerpt or a terminal's scrollback: hard wraps joined
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class InputError(ValueError):
    """A path diagnose cannot read as logs: what it is, and the fix."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"{what}; fix: {fix}")



def check_path(path: Path) -> None:
    """Raise InputError unless ``path`` is a run/log directory or a readable text file."""
    if not path.exists():
        raise InputError(f"{path} does not exist",
                         "pass a run directory (runs/<time>-<name>/) or a log file that exists")
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        if not log_files(path):
            raise InputError(f"{path} holds no log files ({', '.join(LOG_SUFFIXES)}, error.json)",
                             "pass the run directory or the log files themselves")
        return
    if not stat.S_ISREG(mode):
        raise InputError(f"{path} is not a regular file (a FIFO, device or socket)",
                         "save the output to a file first, e.g. ... 2>&1 | tee train.log")
    try:
        with path.open("rb") as stream:
            head = stream.read(SNIFF_BYTES)
    except OSError as err:
        raise InputError(f"{path} cannot be read ({err.strerror})", "check its permissions") from err
    if b"\0" in head and not head.startswith(_UTF16_BOMS):
        raise InputError(f"{path} is binary (NUL bytes in its first 64 KiB), not a text log",
                         "pass the text log the job wrote (stdout/stderr, logs/rank-<R>.log)")


def open_log(path: Path) -> io.BufferedIOBase:
    """The file as UTF-8 bytes: UTF-16 logs (Windows PowerShell redirects) are re-encoded;
    a small log hard-wrapped by a terminal or a web page has its lines joined again."""
    stream = path.open("rb")
    if stream.read(2) not in _UTF16_BOMS:
        stream.seek(0)
        if path.stat().st_size > UNWRAP_MAX_BYTES:
            return stream
        with stream:
            return _unwrapped(stream.read(UNWRAP_MAX_BYTES + 1))
    with stream:
        stream.seek(0)
        text = stream.read(UTF16_MAX_BYTES).decode("utf-16", "replace")
    return _unwrapped(text.encode("utf-8"))


def _unwrapped(data: bytes) -> io.BytesIO:
    if len(data) > UNWRAP_MAX_BYTES:
        return io.BytesIO(data)
    text = data.decode("utf-8", "replace")
    joined = unwrap(text)
    return io.BytesIO(data if joined is text else joined.encode("utf-8"))
