"""Per-rank timestamped logs, through torchelastic's own LogsSpecs extension point.

torchrun writes each worker's raw stdout/stderr under ``<run>/torchrun``; ``reify`` is where
torchelastic tells us which global rank each local rank got, so that is where the tailers
that write ``logs/rank-<R>.log`` (and echo chosen ranks to the console) are started.

torchelastic makes its folders and files with the process's umask (0755/0644); under the run
directory they are private as distrun's own are (0700/0600): ``torchrun/`` is made 0700 first,
each attempt's folders are made private in ``reify`` and the ranks' raw logs created 0600
before torchelastic opens them, and ``stop`` makes what the ranks wrote there since
(``error.json``) private too, never through a link. The umask is left alone: the training
script's own files keep the user's modes.

Every line reaches the rank log, however fast it was printed: a tailer reads its file in
large chunks, stamps each complete line with the time it read the chunk, writes the batch and
flushes it (the raw file under ``torchrun/`` holds the same bytes the moment the rank wrote
them). ``stop`` drains every file to its end before anything is closed; a tailer that cannot
finish is reported as a lost-lines count, never hidden.
"""

from __future__ import annotations

import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, LogsDest, Std

from distrun.model.rundir import DIR_MODE, FILE_MODE, RunDir, make_dir, open_new, spared, utc_now
from distrun.model.terminal import to_console

POLL_S = 0.05
CHUNK = 1 << 20
STUCK_S = 60.0  # a tailer that reads nothing new for this long while draining is given up


class StampedWriter:
    """A text sink that prefixes each line with a UTC timestamp and its stream name."""

    def __init__(self, sink: IO[str], stream: str, lock: threading.Lock,
                 echo: IO[str] | None, echo_prefix: str) -> None:
        self.sink, self.stream, self.lock = sink, stream, lock
        self.echo, self.echo_prefix = echo, echo_prefix
        self.unwritten = 0  # lines the rank log lost (a full disk); the raw file keeps them

    def write_lines(self, lines: list[str]) -> None:
        """Complete lines (each ending in a newline), stamped with one read time. A rank log
        that cannot be written (disk full) counts the lines it lost and warns once."""
        stamp = f"{utc_now()} {self.stream} "
        with self.lock:
            try:
                if not self.unwritten:
                    self.sink.write("".join(stamp + line for line in lines))
                    self.sink.flush()
                if self.unwritten or getattr(self.sink, "failed", False):
                    self.unwritten += len(lines)
            except (OSError, ValueError) as exc:
                self.unwritten += len(lines)
                if isinstance(exc, OSError):
                    spared(exc, f"{getattr(self.sink, 'name', 'a rank log')}: lines lost")
        if self.echo is not None:
            self.echo = to_console(self.echo, "".join(self.echo_prefix + line for line in lines))

    def write(self, text: str) -> int:
        self.write_lines([text if text.endswith("\n") else text + "\n"])
        return len(text)


class Tailer(threading.Thread):
    """Follows one file the rank writes; after ``finished`` it reads to the end and stops."""

    def __init__(self, path: str, writer: StampedWriter, finished: threading.Event,
                 name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.path, self.writer, self.finished = path, writer, finished
        self.lines = 0
        self.last_progress = time.monotonic()

    def run(self) -> None:
        while not os.path.exists(self.path):
            if self.finished.is_set():
                return
            time.sleep(POLL_S)
        with open(self.path, "rb") as src:
            self._follow(src)

    def _follow(self, src: IO[bytes]) -> None:
        rest = b""
        while True:
            chunk = src.read(CHUNK)
            if chunk:
                self.last_progress = time.monotonic()
                rest = self._emit(rest + chunk)
            elif self.finished.is_set():
                if rest:
                    self._emit(rest + b"\n")
                return
            else:
                time.sleep(POLL_S)

    def _emit(self, data: bytes) -> bytes:
        head, sep, rest = data.rpartition(b"\n")
        if len(rest) > CHUNK:  # a line longer than a chunk is written in chunk-sized pieces
            head, sep, rest = data, b"\n", b""
        if sep:
            text = (head + b"\n").decode("utf-8", errors="replace")
            lines = text.splitlines(keepends=True)
            self.writer.write_lines(lines)
            self.lines += len(lines)
        return rest


class RunDirLogsSpecs(DefaultLogsSpecs):
    """torchrun's default layout under ``<run>/torchrun`` plus stamped per-rank logs."""

    def __init__(self, run: RunDir, node_rank: int, echo: Callable[[int, int], bool],
                 machine_stdout: bool = False) -> None:
        self.root = run.path / "torchrun"
        make_dir(self.root)  # 0700 (torchelastic's makedirs would use the umask)
        super().__init__(log_dir=str(self.root), redirects=Std.ALL, tee=Std.NONE)
        self.run, self.node_rank, self.echo = run, node_rank, echo
        self.machine_stdout = machine_stdout  # --json: the ranks' stdout is echoed to stderr
        self.host = socket.gethostname()
        self._finished = threading.Event()
        self._threads: list[Tailer] = []
        self.lost_streams: list[str] = []
        self._files: list[IO[str]] = []

    def reify(self, envs: dict[int, dict[str, str]]) -> LogsDest:
        dest = super().reify(envs)
        self.stop()  # the last attempt's tailers; this attempt's new folders made private
        self._finished = threading.Event()
        for path in (*dest.stdouts.values(), *dest.stderrs.values()):
            _new_private(path)
        ranks = {}
        for local, env in envs.items():
            rank = int(env["RANK"])
            node = int(env.get("GROUP_RANK", self.node_rank))
            ranks[str(rank)] = {"local_rank": local, "node_rank": node, "host": self.host}
            self._tail(rank, local, dest)
        first = envs.get(0, {})
        self.run.event("workers_started", attempt=int(first.get("TORCHELASTIC_RESTART_COUNT", 0)),
                       world_size=int(first.get("WORLD_SIZE", 0)), ranks=ranks,
                       master_addr=first.get("MASTER_ADDR"), master_port=first.get("MASTER_PORT"))
        return dest

    def _tail(self, rank: int, local: int, dest: LogsDest) -> None:
        sink = self.run.append(f"logs/rank-{rank}.log")
        self._files.append(sink)
        lock = threading.Lock()
        shown = self.echo(rank, local)
        consoles = {"out": sys.stderr if self.machine_stdout else sys.stdout, "err": sys.stderr}
        prefix = "" if rank == 0 else f"[rank{rank}] "
        for stream, path in (("out", dest.stdouts[local]), ("err", dest.stderrs[local])):
            writer = StampedWriter(sink, stream, lock, consoles[stream] if shown else None, prefix)
            thread = Tailer(path, writer, self._finished, f"tail-{rank}-{stream}")
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Read every log to its end, then close. Call after the workers have exited.

        Waits as long as the tailers make progress; one that reads nothing for ``STUCK_S``
        is named in ``lost_streams`` and its file is left open (it is a daemon thread)."""
        self._finished.set()
        for thread in self._threads:
            while thread.is_alive() and time.monotonic() - thread.last_progress < STUCK_S:
                thread.join(timeout=1.0)
            if thread.is_alive():
                self.lost_streams.append(thread.name)
            elif thread.writer.unwritten:
                self.lost_streams.append(f"{thread.name} ({thread.writer.unwritten} lines "
                                         "not written)")
        if not any(t.is_alive() for t in self._threads):
            for sink in self._files:
                try:
                    sink.close()
                except OSError as exc:
                    spared(exc, "a rank log")
        self._threads, self._files = [], []
        private(self.root)


def _new_private(path: str) -> None:
    """A rank's raw log made 0600 before torchelastic opens it (and keeps the mode); if it
    cannot be, torchelastic makes it and ``stop`` makes it private."""
    try:
        os.close(open_new(Path(path)))
    except OSError:
        return


def private(root: Path) -> None:
    """Every folder under ``root`` (itself too) 0700 and every file 0600; a link is neither
    followed nor changed, anything else (a socket, a FIFO) is left alone."""
    _chmod(str(root))
    for folder, dirs, files in os.walk(root):  # a link to a folder is listed, not entered
        for name in (*dirs, *files):
            _chmod(os.path.join(folder, name))


def _chmod(path: str) -> None:
    try:
        kind = os.lstat(path).st_mode
        if not (stat.S_ISDIR(kind) or stat.S_ISREG(kind)):
            return
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # gone, a link put in its place since (ELOOP), or unreadable
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind) or stat.S_ISREG(kind):
            os.fchmod(fd, DIR_MODE if stat.S_ISDIR(kind) else FILE_MODE)
    except OSError:
        pass
    finally:
        os.close(fd)
