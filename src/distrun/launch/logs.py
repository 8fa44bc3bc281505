"""Per-rank timestamped logs, through torchelastic's own LogsSpecs extension point.

torchrun writes each worker's raw stdout/stderr under ``<run>/torchrun``; ``reify`` is where
torchelastic tells us which global rank each local rank got, so that is where the tailers
that write ``logs/rank-<R>.log`` (and echo chosen ranks to the console) are started.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable
from typing import IO

from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, LogsDest, Std
from torch.distributed.elastic.multiprocessing.tail_log import tail_logfile

from distrun.model.rundir import RunDir, utc_now

POLL_S = 0.05


def _every_line(line: str) -> bool:
    return True


class StampedWriter:
    """A text sink that prefixes each line with a UTC timestamp and its stream name."""

    def __init__(self, sink: IO[str], stream: str, lock: threading.Lock,
                 echo: IO[str] | None, echo_prefix: str) -> None:
        self.sink, self.stream, self.lock = sink, stream, lock
        self.echo, self.echo_prefix = echo, echo_prefix

    def write(self, text: str) -> int:
        line = text if text.endswith("\n") else text + "\n"
        with self.lock:
            self.sink.write(f"{utc_now()} {self.stream} {line}")
            self.sink.flush()
        if self.echo is not None:
            self.echo.write(self.echo_prefix + line)
            self.echo.flush()
        return len(text)


class RunDirLogsSpecs(DefaultLogsSpecs):
    """torchrun's default layout under ``<run>/torchrun`` plus stamped per-rank logs."""

    def __init__(self, run: RunDir, node_rank: int, echo: Callable[[int, int], bool]) -> None:
        super().__init__(log_dir=str(run.path / "torchrun"), redirects=Std.ALL, tee=Std.NONE)
        self.run, self.node_rank, self.echo = run, node_rank, echo
        self.host = socket.gethostname()
        self._finished = threading.Event()
        self._threads: list[threading.Thread] = []
        self._files: list[IO[str]] = []

    def reify(self, envs: dict[int, dict[str, str]]) -> LogsDest:
        dest = super().reify(envs)
        self.stop()
        self._finished = threading.Event()
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
        echo = sys.stdout if self.echo(rank, local) else None
        prefix = "" if rank == 0 else f"[rank{rank}] "
        for stream, path in (("out", dest.stdouts[local]), ("err", dest.stderrs[local])):
            writer = StampedWriter(sink, stream, lock, echo, prefix)
            thread = threading.Thread(target=tail_logfile, daemon=True, name=f"tail-{rank}-{stream}",
                                      args=("", path, writer, self._finished, POLL_S, _every_line))
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Read every log to its end, then close. Call after the workers have exited."""
        self._finished.set()
        for thread in self._threads:
            thread.join(timeout=10)
        for sink in self._files:
            sink.close()
        self._threads, self._files = [], []
