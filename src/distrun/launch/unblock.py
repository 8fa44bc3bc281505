"""A stop signal reaches a torchelastic agent that is blocked in its store.

torchelastic turns SIGTERM, SIGINT and SIGHUP into ``SignalException`` through Python
handlers, and Python runs a handler only between bytecodes. An agent blocked in one C++
call (``store.wait`` at its exit barrier, up to ``exit_barrier_timeout`` = 300 s, or a
rendezvous wait) holds the signal until that wait ends: a node whose ssh session hung up
stayed five minutes after the launch had ended.

While the launch runs, a thread sees every signal that has a Python handler (through
``signal.set_wakeup_fd``). When a stop signal is still pending after ``GRACE_S`` and the
main thread has not moved from a store wait of torchelastic's (same frame, same
instruction, in its store or rendezvous code), it shuts down this process's connections to
the store's port. The wait fails at once, the pending handler runs, and the
launch ends as interrupted, exactly as it would have after the wait. A main thread anywhere else
(torchelastic stopping the ranks, say) is never touched. Once the launch is over, until the
job's record is written, further stop signals are let pass (:func:`hold_stop_signals`).

The same thread sets an event the moment a stop signal arrives (with or without a store
port): from then on the ranks end because of the signal (Ctrl-C, a scheduler's SIGTERM), and
the hang detector must not read their exits as a rank gone (``distrun.monitor.watcher``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

import psutil

from distrun.model.terminal import to_console

GRACE_S = 3.0
STOPS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
HELD = (*STOPS, signal.SIGQUIT)  # every signal torchelastic turns into SignalException
# torchelastic's code that waits on the store: the exit barrier and the rendezvous
WAITS = ("torch/distributed/elastic/utils/store.py",
         "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",
         "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",
         "torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py")


@contextlib.contextmanager
def stop_signals_unblock_store(port: int | None,
                               stopped: threading.Event | None = None) -> Iterator[None]:
    """Run the block with the watcher thread above (it unblocks a store wait only with a store
    port; it sets ``stopped`` at the first stop signal), then hold the stop signals
    (:func:`hold_stop_signals`); off the main thread, none of it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        with _unblocking(port, stopped or threading.Event()):
            yield
    finally:
        hold_stop_signals()


@contextlib.contextmanager
def _unblocking(port: int | None, stopped: threading.Event) -> Iterator[None]:
    """The watcher thread, while the block runs."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    done = threading.Event()
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(read_end, port, done, stopped),
                               name="distrun-unblock", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the thread's read ends
        watcher.join(timeout=GRACE_S + 1)
        os.close(read_end)


def hold_stop_signals() -> None:
    """The ranks are done: from here to the job's record a stop signal is let pass. A hung-up
    terminal sends SIGHUP twice (to the foreground group, then as its session leader exits),
    and torchelastic's handlers, still installed, would raise the second one in the middle of
    the bookkeeping and lose the record. A handler, not SIG_IGN, which children would inherit."""
    for signum in HELD:
        signal.signal(signum, _let_pass)


def _let_pass(signum: int, frame: object) -> None:
    """A stop signal after the ranks ended: the job is ending already."""


Handlers = dict[int, Any]


def stop_handlers() -> Handlers:
    """The stop signals' handlers now (before torchelastic installs its own)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.getsignal(signum) for signum in HELD}


def restore_handlers(handlers: Handlers) -> None:
    """Put back what :func:`stop_handlers` saw, once the job's record is written."""
    for signum, handler in handlers.items():
        if handler is not None:
            signal.signal(signum, handler)


def endpoint_port(endpoint: str) -> int | None:
    """The port of a rendezvous endpoint ``host:port`` (None: none, or 0 = chosen later)."""
    _, _, port = endpoint.rpartition(":")
    return int(port) if port.isdigit() and 0 < int(port) < 65536 else None


def _watch(read_end: int, port: int | None, done: threading.Event,
           stopped: threading.Event) -> None:
    main = threading.main_thread().ident
    while True:
        try:
            got = os.read(read_end, 64)
        except OSError:
            return
        if not got:
            return
        stops = sorted(STOPS.intersection(got))
        if stops:
            stopped.set()
        if not stops or main is None or port is None:
            continue
        before = _store_wait(main)
        if done.wait(GRACE_S):
            return
        if before is not None and _store_wait(main) == before:
            to_console(sys.stderr, f"distrun: {signal.Signals(stops[0]).name} has waited "
                       f"{GRACE_S:g} s for torchelastic's store wait: closing the connection "
                       f"to port {port} so that the launch can stop (a warning of torch "
                       "about the closed connection may follow)\n")
            shut_store_connections(port)


def _store_wait(ident: int) -> tuple[int, int] | None:
    """Where the main thread is (frame, instruction) when its innermost Python frame is
    torchelastic's store or rendezvous code, which blocks only in store calls; else None.
    The same place ``GRACE_S`` after a stop signal: blocked in one store call."""
    frame = sys._current_frames().get(ident)
    if frame is None or not frame.f_code.co_filename.replace(os.sep, "/").endswith(WAITS):
        return None
    return id(frame), frame.f_lasti


def shut_store_connections(port: int) -> None:
    """Shut down (both ways) this process's TCP connections to ``port``."""
    for conn in psutil.Process().net_connections(kind="tcp"):
        if conn.fd < 0 or not conn.raddr or conn.raddr.port != port:
            continue
        try:
            with socket.socket(fileno=os.dup(conn.fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            continue  # closed meanwhile
