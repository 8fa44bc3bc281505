"""A stop signal ends a store wait that blocks the main thread (distrun.launch.unblock).

Real processes, a real TCPStore on loopback, real signals. The child waits in torchelastic's
barrier (the agents' exit barrier), which one of its two members never reaches (timeout
20 s), with torchelastic's kind of handler (it raises); without the unblocking the handler
runs only when the wait times out.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import datetime, signal, sys, time
from torch.distributed import TCPStore
from torch.distributed.elastic.utils.store import barrier
from distrun.launch.unblock import stop_signals_unblock_store

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop(signum)

signal.signal(signal.SIGTERM, stop)
store = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=20))
started = time.monotonic()


ended = []


def stopped():
    ended.append(f"stopped after {time.monotonic() - started:.1f} s")


try:
    with stop_signals_unblock_store(store.port if sys.argv[1] == "on" else None):
        print("waiting", flush=True)
        try:
            barrier(store, 2, "exit", barrier_timeout=20)  # the agents' exit barrier; 1 of 2 came
        except Stop:  # the handler ran inside torch's barrier
            stopped()
        except Exception:  # the wait ended; the pending handler runs right after
            try:
                time.sleep(5)
            except Stop:
                stopped()
except Stop:
    stopped()
print(ended[0] if ended else "no stop", flush=True)
print("held", flush=True)  # the bookkeeping: a second stop signal must let it finish
time.sleep(2)
print("recorded", flush=True)
sys.exit(3 if ended else 0)
"""


def run_child(mode: str, tmp_path: Path) -> tuple[int, str, float, str]:
    """The child's exit status, output, the seconds from the stop signal to its end and its
    stderr; a second stop signal is sent while it writes its record."""
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    err = (tmp_path / "stderr").open("w+", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE,
                            stderr=err, text=True,
                            env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "waiting"
        time.sleep(0.5)  # into the C++ wait
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        lines = []
        while not lines or lines[-1] != "held":
            lines.append(proc.stdout.readline().strip())
            assert lines[-1], lines  # the child ended before its bookkeeping
        took = time.monotonic() - sent
        proc.send_signal(signal.SIGTERM)  # as a hung-up terminal does
        out, _ = proc.communicate(timeout=90)
        err.seek(0)
        return proc.returncode, "\n".join(lines) + "\n" + out, took, err.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        err.close()


@pytest.mark.timeout(120)
def test_a_stop_signal_ends_a_blocked_store_wait(tmp_path: Path) -> None:
    rc, out, took, err = run_child("on", tmp_path)
    assert rc == 3, out
    assert "distrun: SIGTERM has waited 3 s for torchelastic's store wait: closing the " \
        "connection to port " in err, err  # what the user sees before torch's own warning
    assert "stopped after" in out, out
    assert out.endswith("held\nrecorded\n"), out  # the second signal let the record be written
    assert took < 12, took  # the store's own timeout is 20 s; distrun acts after 3 s


@pytest.mark.timeout(120)
def test_without_it_the_signal_waits_for_the_store_timeout(tmp_path: Path) -> None:
    # what torchelastic's exit barrier did: the handler ran only when the wait timed out
    rc, out, took, err = run_child("off", tmp_path)
    assert rc == 3, out
    assert "distrun:" not in err, err
    assert took >= 15, (rc, out, took)


BUSY = """
import datetime, signal, sys, time
from torch.distributed import TCPStore
from distrun.launch.unblock import stop_signals_unblock_store

seen = []
signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))  # handled, no raise
store = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=20))
with stop_signals_unblock_store(store.port):
    print("waiting", flush=True)
    until = time.monotonic() + 8
    while time.monotonic() < until:  # Python running, as torchelastic stopping its workers
        sum(range(1000))
    store.set("key", "value")  # the connection is still whole
    print(f"signals {len(seen)} get {store.get('key').decode()}", flush=True)
"""


@pytest.mark.timeout(120)
def test_a_main_thread_running_python_keeps_its_store(tmp_path: Path) -> None:
    script = tmp_path / "busy.py"
    script.write_text(BUSY, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "waiting"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, err[-2000:]
    assert out.strip() == "signals 1 get value"
    assert "distrun:" not in err, err
