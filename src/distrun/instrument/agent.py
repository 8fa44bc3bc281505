"""The per-rank agent: faulthandler on SIGUSR1 at start; when ``init_process_group`` returns,
a daemon thread that reads torch's Flight Recorder (and the point-to-point ops of
:mod:`distrun.instrument.p2p`) once a second and rewrites ``<run>/progress/rank-<R>.json``
atomically: at once when progress stops or an op gets described, at most every
``STEADY_WRITE_S`` while it goes on (docs/instrument.md, "Cost"); and
``destroy_process_group`` lets gloo's worker threads finish before the groups can be freed
(:func:`distrun.model.teardown.settle`).

Nothing here imports torch at interpreter start: an import hook waits for
``torch.distributed.distributed_c10d`` and wraps its ``init_process_group``. Every error of
the agent's own is swallowed with one warning line on stderr; it never changes what the script
does, prints or returns.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from distrun.instrument import ENV_PID, PROGRESS_DIR, flight, oomrecord, p2p, progress_path
from distrun.model.progress import GroupProgress, RankProgress
from distrun.model.rundir import spared
from distrun.model.teardown import settle

C10D = "torch.distributed.distributed_c10d"
TICK_S = 1.0
DESCRIBE_AFTER_S = 2.0  # a collective in flight this long gets its op and sizes looked up
DESCRIBE_EVERY_S = 5.0  # at most one full Flight Recorder read per this many seconds
# While counters move every tick, the file is rewritten at most this often; the first tick
# without a change writes at once, so a stall shows within 2 ticks. Kept well below
# distrun.monitor.hang.HANG_AFTER_S: a resumed rank is never seen stuck that long.
STEADY_WRITE_S = 5.0
# At a normal exit, how long the last read waits for a collective that returned to show as
# completed (flight.last_counters); an exit with an op really in flight is that much later.
EXIT_SETTLE_S = 0.5
CPU_BACKENDS = ("gloo", "mpi")

_warned = False


def warn(what: str, exc: BaseException) -> None:
    """The agent's one warning line; later errors stay quiet."""
    global _warned  # noqa: PLW0603
    if not _warned:
        _warned = True
        try:
            sys.stderr.write(f"distrun: instrument: {what}: {type(exc).__name__}: {exc} "
                             "(the script is not affected; progress of this rank is not "
                             "recorded)\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def activate(env: Mapping[str, str]) -> None:
    run_dir, rank = env.get("DISTRUN_RUN_DIR"), env.get("RANK", "")
    if not run_dir or not rank.isdigit():
        return
    os.environ[ENV_PID] = str(os.getpid())
    if signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    oomrecord.install(run_dir, int(rank), env)  # the rank_oom event, if an OOM ends the rank
    agent = Agent(run_dir, int(rank))
    module = sys.modules.get(C10D)
    if module is not None:
        agent.hook(module)
    else:
        sys.meta_path.insert(0, _Finder(agent.hook))


class _Loader(importlib.abc.Loader):
    """The real loader, then ``after(module)``; every other attribute is the real loader's."""

    def __init__(self, inner: Any, after: Callable[[ModuleType], None]) -> None:
        self._inner, self._after = inner, after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        made: ModuleType | None = self._inner.create_module(spec)
        return made

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, after: Callable[[ModuleType], None]) -> None:
        self._after = after

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != C10D:
            return None
        sys.meta_path.remove(self)  # one shot: from here on the normal finders answer
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, self._after)
        return spec


class Agent:
    def __init__(self, run_dir: str, rank: int) -> None:
        self.run_dir, self.rank = run_dir, rank
        self.tracker: Tracker | None = None
        self.p2p = p2p.Recorder()

    def hook(self, module: ModuleType) -> None:
        try:
            original = getattr(module, "init_process_group")  # noqa: B009
            destroy = getattr(module, "destroy_process_group")  # noqa: B009
        except AttributeError as exc:
            warn("torch.distributed has no init/destroy_process_group", exc)
            return
        try:
            p2p.wrap(module, self.p2p)
        except Exception as exc:
            warn("point-to-point ops are not recorded", exc)

        @functools.wraps(original)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            self.joined()
            return out

        @functools.wraps(destroy)
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            kept = _gloo_groups()
            try:
                return destroy(*args, **kwargs)
            finally:
                settle(kept)

        setattr(module, "init_process_group", init_process_group)  # noqa: B010
        setattr(module, "destroy_process_group", destroy_process_group)  # noqa: B010

    def joined(self) -> None:
        if self.tracker is not None:
            return
        try:
            self.tracker = Tracker(Writer(self.run_dir, self.rank), self.rank, self.p2p)
            self.tracker.start()
            atexit.register(self.tracker.finish)
        except Exception as exc:
            warn("could not start", exc)


class Writer:
    """``<run>/progress/rank-<R>.json``, 0600, replaced atomically, never through a link."""

    def __init__(self, run_dir: str, rank: int) -> None:
        folder = os.path.join(run_dir, PROGRESS_DIR)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.path.islink(folder):
            raise OSError(f"{folder} is a symbolic link")
        self.path = progress_path(run_dir, rank)
        self.tmp = os.path.join(folder, f".rank-{rank}.json.{os.getpid()}.tmp")

    def write(self, text: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.tmp, flags, 0o600)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.replace(self.tmp, self.path)


class Tracker(threading.Thread):
    """Once a second: the Flight Recorder's counters and the p2p ops; a file write when they
    stopped changing, when an op was described, or every ``STEADY_WRITE_S`` while they move."""

    def __init__(self, writer: Writer, rank: int, recorder: p2p.Recorder | None = None) -> None:
        super().__init__(name="distrun-progress", daemon=True)
        self.writer, self.rank = writer, rank
        self.joined_at = time.time()
        self._halt = threading.Event()
        self._exited = False  # the exit's write is the last: no tick writes after it
        self._lock = threading.Lock()
        self._raw: tuple[bytes, ...] = ()
        self._groups: dict[str, GroupProgress] = {}
        self._members: dict[str, tuple[tuple[int, ...], str]] = {}
        self._described_at = 0.0
        self._base = RankProgress(rank=rank, pid=os.getpid(), host=socket.gethostname(),
                                  joined_at=self.joined_at)
        self._written_at: float | None = None
        self._dirty = False
        self._recorder = recorder or p2p.Recorder()
        self._p2p_version = -1
        self._shift: dict[str, int] = {}  # p2p ops taken off gloo's numbers, per group

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                self.update(time.time())
                self._halt.wait(TICK_S)
        except Exception as exc:
            warn("progress thread stopped", exc)

    def finish(self) -> None:
        """At interpreter exit: the last counters, what is still in flight, and the exit."""
        if os.getpid() != self._base.pid:
            return  # a forked child of the rank leaving: not the rank
        self._halt.set()
        try:
            self.update(time.time(), exiting=True)
        except Exception as exc:
            warn("final progress not recorded", exc)

    def update(self, now: float, exiting: bool = False) -> None:
        with self._lock:
            if self._exited:
                return
            self._exited = exiting
            raw = flight.status_raw()
            changed = raw != self._raw
            if changed:
                self._raw = raw
                self._merge(flight.parse_status(raw), now)
            if exiting and getattr(sys, "last_value", None) is None:  # a normal exit
                self._merge(_or_warn(flight.last_counters, EXIT_SETTLE_S), now)
            self._recorder.poll(now)
            if self._recorder.version != self._p2p_version:
                self._p2p_version, changed = self._recorder.version, True
            want = self._undescribed(now, exiting)
            if want:
                self._describe(want, now)
            self._dirty = self._dirty or changed
            if self._due(now, changed, bool(want) or exiting):
                self._write(now, exiting)

    def _due(self, now: float, changed: bool, urgent: bool) -> bool:
        if urgent or self._written_at is None:
            return True
        steady = now - self._written_at < STEADY_WRITE_S
        return self._dirty and not (changed and steady)

    def _merge(self, counters: Mapping[str, flight.Counters], now: float) -> None:
        """gloo's numbers count the group's p2p ops too: those this rank issued so far are taken
        off, so that ranks with different p2p traffic (pipeline stages) agree on collective
        numbers. Exact for a rank waiting in a collective; a rank that did p2p ops after its
        last collective shows a lower number (it is behind either way)."""
        gloo = _static_identity()[0] == "gloo"
        for pg, count in counters.items():
            old = self._groups.get(pg)
            shift = self._shift.get(pg, 0)
            if old is not None and (old.enqueued + shift, old.completed + shift) == (
                    count.enqueued, count.completed):
                continue
            if old is None:
                ranks, desc = self._member(pg)
                old = GroupProgress(pg=pg, desc=desc, ranks=ranks)
            shift = self._shift[pg] = self._recorder.groups.get(pg, 0) if gloo else 0
            self._groups[pg] = GroupProgress(
                pg=pg, desc=old.desc, ranks=old.ranks, enqueued=max(count.enqueued - shift, 0),
                completed=max(count.completed - shift, 0), changed_at=now, op=old.op,
                op_seq=old.op_seq, sizes=old.sizes, dtypes=old.dtypes, timeout_s=old.timeout_s)

    def _member(self, key: str) -> tuple[tuple[int, ...], str]:
        pg = key.removesuffix(flight.CPU_SUFFIX)
        if pg not in self._members:
            self._members = _groups()
        return self._members.get(pg, ((), ""))

    def _undescribed(self, now: float, exiting: bool) -> list[tuple[str, int]]:
        if not exiting and now - self._described_at < DESCRIBE_EVERY_S:
            return []
        # leaving on an uncaught exception (Python sets sys.last_value before atexit): the
        # last collective too, which gloo counts as completed even when it failed
        failed = exiting and getattr(sys, "last_value", None) is not None
        return [(pg, g.enqueued + self._shift.get(pg, 0)) for pg, g in self._groups.items()
                if (g.in_flight or failed) and g.enqueued > 0 and g.op_seq != g.enqueued
                and (exiting or now - g.changed_at >= DESCRIBE_AFTER_S)]

    def _describe(self, want: list[tuple[str, int]], now: float) -> None:
        self._described_at = now
        found = _or_warn(flight.describe, want)
        for pg, seq in want:  # the Flight Recorder's number; the group's own may be shifted
            g, d = self._groups[pg], found.get((pg, seq))
            self._groups[pg] = GroupProgress(
                pg=pg, desc=g.desc, ranks=g.ranks, enqueued=g.enqueued, completed=g.completed,
                changed_at=g.changed_at, op=d.op if d else "?", op_seq=g.enqueued,
                sizes=d.sizes if d else (), dtypes=d.dtypes if d else (),
                timeout_s=d.timeout_s if d else None)

    def _write(self, now: float, exiting: bool) -> None:
        backend, world, device = _identity()
        b = self._base
        state = RankProgress(rank=b.rank, pid=b.pid, host=b.host, backend=backend,
                             world_size=world, device=device, joined_at=b.joined_at,
                             updated_at=now, exited_at=now if exiting else None,
                             groups=dict(self._groups), p2p=self._recorder.snapshot())
        try:
            self.writer.write(state.dumps())
        except OSError as exc:  # a full disk: this tick's progress is lost, the rank goes on
            spared(exc, f"progress/rank-{b.rank}.json")
            return
        self._written_at, self._dirty = now, False


def _or_warn(read: Callable[[Any], dict[Any, Any]], arg: Any) -> dict[Any, Any]:
    """A Flight Recorder read that adds to a write; when it fails, the write goes on without."""
    try:
        return read(arg)
    except Exception as exc:
        warn(f"{getattr(read, '__name__', 'read')} failed", exc)
        return {}


def _gloo_groups() -> list[Any]:
    """The live process groups with a gloo backend (references that outlive the destroy)."""
    try:
        c10d = sys.modules[C10D]
        groups = list(c10d._world.pg_map)
        return [pg for pg in groups if "gloo" in str(c10d.get_backend(pg))]
    except Exception as exc:  # torch internals moved: no settling, the destroy goes on
        warn("process groups not found at destroy", exc)
        return []


def _groups() -> dict[str, tuple[tuple[int, ...], str]]:
    """``{group name: (global ranks, description)}`` of every process group this rank knows."""
    c10d = sys.modules[C10D]
    out = {}
    for pg, name in dict(c10d._world.pg_names).items():
        try:
            ranks = tuple(int(r) for r in c10d.get_process_group_ranks(pg))
        except (RuntimeError, ValueError, KeyError):
            continue
        out[str(name)] = (ranks, str(getattr(pg, "group_desc", "") or ""))
    return out


@functools.lru_cache(maxsize=1)
def _static_identity() -> tuple[str, int]:
    c10d = sys.modules[C10D]
    return str(c10d.get_backend()), int(c10d.get_world_size())


def _identity() -> tuple[str, int, str]:
    """Backend, world size and this rank's device (``cpu`` for gloo and MPI; else the current
    accelerator device, once the script has one)."""
    backend, world = _static_identity()
    if any(b in backend for b in CPU_BACKENDS) and ":" not in backend:
        return backend, world, "cpu"
    torch = sys.modules.get("torch")
    acc = getattr(torch, "accelerator", None)
    if acc is None:
        return backend, world, ""
    try:
        kind = acc.current_accelerator()
        return backend, world, f"{kind.type}:{acc.current_device_index()}" if kind else ""
    except (RuntimeError, AttributeError):
        return backend, world, ""
