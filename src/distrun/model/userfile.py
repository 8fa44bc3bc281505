"""Reading a small text file the user named (config, hostfile, inventory), safely.

Only a regular file is read: a FIFO would block forever, ``/dev/zero`` never ends, a directory
is a mistake. The size is capped before reading, the bytes must be UTF-8, and every refusal is
one :class:`~distrun.errors.UsageError` line naming the file, what it is, and the fix. The file
is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor, so a path
swapped for a FIFO between a check and the open cannot block either.
"""

from __future__ import annotations

import os
import stat

from distrun.errors import UsageError
from distrun.model.rundir import kind

TEXT_MAX = 1024 * 1024
SHOWN_MAX = 80


def shown(value: object, limit: int = SHOWN_MAX) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line errors about user input."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 20]}...({len(text)} chars)"


def _read_regular(fd: int, name: str, what: str, fix: str, limit: int) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what} {name} is {kind(st.st_mode)}", "a regular text file", fix)
    if st.st_size > limit:
        raise UsageError(f"{what} {name} is {st.st_size} bytes", f"at most {limit} bytes of text",
                         fix)
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= limit:
            chunk = os.read(fd, min(65536, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {name}: {exc.strerror or exc}", "a readable file",
                         fix) from None
    return b"".join(chunks)


def read_user_text(path: str | os.PathLike[str], what: str, fix: str,
                   limit: int = TEXT_MAX) -> str:
    """The UTF-8 text of the small regular file ``path``; ``what`` names it ('hostfile')."""
    name = shown(os.fspath(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot read {what} {name}: {exc.strerror or exc}",
                         "a readable file", fix) from None
    try:
        data = _read_regular(fd, name, what, fix, limit)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UsageError(f"{what} {name} is over {limit} bytes", f"at most {limit} bytes", fix)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {name} is not UTF-8 text (byte {exc.start}: "
                         f"{data[exc.start:exc.start + 1]!r})", "a UTF-8 text file",
                         fix) from None
