"""The run directory's files, written safely (standard library only: the runtime uses it).

Layout (docs/run-directory.md)::

    <run>/plan.json  env.json  events.jsonl  summary.json  samples.jsonl
    <run>/logs/rank-<R>.log       "<ISO-8601 UTC> <out|err> <text>" per line
    <run>/logs/launcher.log       the launcher's own log
    <run>/heartbeats/rank-<R>     "<unix time> <step>", rewritten in place by the rank
    <run>/torchrun/...            torchrun's raw per-attempt logs and error.json files

Every file is created without following a symbolic link (``O_NOFOLLOW``; ``O_EXCL`` where the
file must be new), folders are 0700 and files 0600: a run directory in a shared scratch folder
cannot be used to write through a planted link, and its logs and environment are the user's
alone. A new run directory is made with ``mkdir`` (never ``exist_ok``), so two launches started
in the same second from one folder get two directories. Events are one ``O_APPEND`` write per
line (atomic for a line), shared by the launcher and every rank. A file is read
(``open_read``, ``read_bytes``) only when it is a regular file, never through a link, opened
with ``O_NONBLOCK`` and checked with ``fstat`` on the descriptor: a FIFO planted as
``events.jsonl`` cannot block a reader (``monitor``, ``report``).
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, cast

DIR_MODE = 0o700
FILE_MODE = 0o600
EVENTS = "events.jsonl"
SAMPLES = "samples.jsonl"
PLAN = "plan.json"
SUMMARY = "summary.json"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
MAX_SUFFIX = 1000


class RunDirError(OSError):
    """A run directory that cannot be used: the message names the path and the fix."""

    def __init__(self, errno: int | None, message: str) -> None:
        super().__init__(errno or 0, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def utc_now() -> str:
    """The time stamp of events and log lines: ``2025-01-01T00:00:00.000000Z``."""
    return utc_stamp(datetime.now(timezone.utc).timestamp())


def utc_stamp(epoch: float) -> str:
    """``epoch`` as events and log lines write it (UTC, microseconds): one clock for every file
    of a run, so that ``diagnose`` orders lines from different files right in any time zone."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _refuse_link(path: Path, exc: OSError) -> RunDirError:
    if os.path.islink(path):
        return RunDirError(exc.errno, f"{path} is a symbolic link: distrun does not write "
                           "through links (remove it, or choose a new folder)")
    return RunDirError(exc.errno, f"cannot write {path}: {exc.strerror}")


def kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: Path, mode: int) -> RunDirError:
    return RunDirError(0, f"{path} is {kind(mode)}, not a regular file: distrun reads only "
                       "regular files of a run directory (remove it, or pass another run)")


def open_read(path: Path) -> int:
    """A run-directory file opened to read; the fd. Never through a link, never blocking (a
    FIFO), a regular file only: anything else is a ``RunDirError`` naming the path and what it
    is. A missing file is the ``FileNotFoundError`` of ``os.open``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:  # ELOOP for a link, ENXIO for a socket: say what is there
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise exc from None
        if stat.S_ISREG(mode):
            raise
        raise not_regular(path, mode) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_regular(path, mode)
    return fd


def read_bytes(path: Path, offset: int = 0, limit: int = -1) -> bytes:
    """The bytes of the regular file ``path`` from ``offset`` (at most ``limit``; see
    ``open_read``)."""
    with os.fdopen(open_read(path), "rb") as fh:
        fh.seek(offset)
        return fh.read(limit)


_lost_warned = False


def spared(exc: OSError, what: str) -> bool:
    """distrun's own record could not be written (disk full, quota, I/O error): warn once per
    process, naming what was lost, and let the job go on. A refused link is not spared."""
    global _lost_warned  # noqa: PLW0603
    if isinstance(exc, RunDirError):
        return False
    if not _lost_warned:
        _lost_warned = True
        try:
            sys.stderr.write(f"distrun: warning: cannot write the run directory ({what}: "
                             f"{exc.strerror or exc}); from here on distrun's record of this "
                             "run is incomplete (the job is not affected)\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    return True


class SparedText(io.TextIOBase):
    """A run-directory text stream whose failed writes (disk full) are one warning, not an
    error; after the first failure it drops what it is given (``failed`` says so)."""

    def __init__(self, raw: IO[str], what: str) -> None:
        super().__init__()
        self._raw, self.what, self.failed = raw, what, False
        self.name = getattr(raw, "name", what)

    def _fail(self, exc: OSError) -> None:
        self.failed = True
        spared(exc, f"{self.what}: lines lost")

    def write(self, text: str) -> int:
        if not self.failed:
            try:
                self._raw.write(text)
            except OSError as exc:
                self._fail(exc)
        return len(text)

    def flush(self) -> None:
        if not self.failed and not self._raw.closed:
            try:
                self._raw.flush()
            except OSError as exc:
                self._fail(exc)

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._raw.close()
        except OSError as exc:
            if not self.failed:
                self._fail(exc)
        super().close()


def _open(path: Path, flags: int) -> int:
    """``os.open`` for writing, 0600 when created, never through a link; the fd."""
    try:
        return os.open(path, os.O_WRONLY | flags | _NOFOLLOW | _CLOEXEC, FILE_MODE)
    except OSError as exc:
        raise _refuse_link(path, exc) from None


def open_new(path: Path) -> int:
    """A new file (it must not exist, and must not be a link), 0600; returns the fd."""
    return _open(path, os.O_CREAT | os.O_EXCL)


def open_append(path: Path) -> int:
    """A file to append to, created 0600 if absent; a link in its place is refused."""
    return _open(path, os.O_APPEND | os.O_CREAT)


def open_rewrite(path: Path) -> int:
    """A file rewritten in place (a heartbeat), created 0600 if absent; never through a link."""
    return _open(path, os.O_CREAT)


def append_text(path: Path) -> IO[str]:
    """A line-buffered text stream appending to ``path`` (see ``open_append``)."""
    return os.fdopen(open_append(path), "a", encoding="utf-8", buffering=1)


def make_dir(path: Path) -> None:
    """A folder 0700 inside the run directory; an existing real folder is kept, a link refused."""
    try:
        os.mkdir(path, DIR_MODE)
        return
    except FileExistsError as exc:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise _refuse_link(path, exc) from None
    except OSError as exc:
        raise RunDirError(exc.errno, f"cannot create {path}: {exc.strerror}") from None


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def write_text(path: Path, text: str, mode: int = FILE_MODE) -> None:
    """Write through a new temporary file (``mode``, 0600 unless said) and rename it over
    ``path`` (rename replaces a link itself, never its target)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = open_new(tmp)
    try:
        if mode != FILE_MODE:
            os.fchmod(fd, mode)  # not the umask's: fchmod sets it as given
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def event_line(name: str, fields: dict[str, Any], when: float | None = None) -> bytes:
    """One events.jsonl line, stamped now (or at the Unix time ``when``)."""
    stamp = utc_now() if when is None else utc_stamp(when)
    return (json.dumps({"time": stamp, "event": name, **fields}, default=str) + "\n").encode()


def create(path: Path, *, chosen: bool) -> Path:
    """Make a fresh run directory. ``chosen`` (``--run-dir``): an empty existing folder is
    used, a non-empty one refused; otherwise a unique ``-2``, ``-3`` ... suffix is added when a
    launch in the same second took the name."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(exc.errno, f"cannot create the folder {path.parent} for the run "
                          f"directory: {exc.strerror or exc}") from None
    if chosen:
        return _use_chosen(path)
    for n in range(1, MAX_SUFFIX):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            os.mkdir(candidate, DIR_MODE)
            return candidate
        except FileExistsError:
            continue
        except OSError as exc:
            raise RunDirError(exc.errno, f"cannot create run directory {candidate}: "
                              f"{exc.strerror}") from None
    raise RunDirError(0, f"{MAX_SUFFIX} run directories named {path.name}-N exist already")


def _use_chosen(path: Path) -> Path:
    try:
        os.mkdir(path, DIR_MODE)
        return path
    except FileExistsError:
        pass
    except OSError as exc:
        raise RunDirError(exc.errno, f"cannot create run directory {path}: {exc.strerror} "
                          "(choose a new folder)") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise RunDirError(0, f"--run-dir {path} is {kind}: choose a new folder")
    if any(os.scandir(path)):
        raise RunDirError(0, f"--run-dir {path} is not empty (it may hold another run): "
                          "choose a new folder")
    os.chmod(path, DIR_MODE)
    return path


class RunDir:
    """One launcher's record of one job. Every write is flushed as it happens."""

    def __init__(self, path: Path) -> None:
        """Open a run directory (made by ``create`` for a launch; made here if absent)."""
        self.path = path
        self.logs = path / "logs"
        path.parent.mkdir(parents=True, exist_ok=True)
        make_dir(path)
        make_dir(self.logs)
        self._lock = threading.Lock()
        self._events = open_append(path / EVENTS)

    @classmethod
    def create(cls, path: Path, *, chosen: bool = False) -> RunDir:
        return cls(create(path, chosen=chosen))

    def write_json(self, name: str, data: Any) -> None:
        """Write a record; a full disk is a warning (see ``spared``), never an error."""
        try:
            write_json(self.path / name, data)
        except OSError as exc:
            if not spared(exc, name):
                raise

    def event(self, name: str, **fields: Any) -> None:
        line = event_line(name, fields)
        with self._lock:
            if self._events >= 0:
                try:
                    os.write(self._events, line)
                except OSError as exc:
                    spared(exc, f"{EVENTS} ({name} event lost)")

    def rank_log(self, rank: int) -> Path:
        return self.logs / f"rank-{rank}.log"

    def append(self, relative: str) -> IO[str]:
        """A text stream appending to a file of the run directory (logs, samples); a write
        that fails (disk full) is one warning and the stream's ``failed`` (``SparedText``)."""
        return cast(IO[str], SparedText(append_text(self.path / relative), relative))

    def close(self) -> None:
        with self._lock:
            if self._events >= 0:
                try:
                    os.close(self._events)
                except OSError as exc:
                    spared(exc, EVENTS)
                self._events = -1
