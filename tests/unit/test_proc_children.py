"""A rank's process idles while its child processes work (DataLoader workers, a compiler it
waits for): the sampler adds the descendants' CPU, measured on real processes."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import psutil
import pytest

from distrun.monitor.procs import ProcSampler

# the parent sleeps in wait() while its grandchild spins: idle rank, busy descendants
IDLE_PARENT = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
               "'import subprocess, sys; subprocess.run([sys.executable, \"-c\", "
               "\"while True: pass\"])'])")
BUSY_PARENT = "while True: pass"


def sample_twice(pid: int) -> tuple[float | None, float | None]:
    sampler = ProcSampler()
    sampler.read([pid])
    time.sleep(1.0)
    sampler.read([pid])  # the descendants' first look only starts their measurement
    time.sleep(1.0)
    sample = sampler.read([pid])[pid]
    return sample.cpu_percent, sample.children_cpu_percent


def stop(proc: subprocess.Popen[bytes]) -> None:
    family = [proc.pid]
    with contextlib.suppress(psutil.NoSuchProcess):
        family += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
    for pid in reversed(family):
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10  # a killed process takes a moment to be gone
    while _alive(family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(family)


def _alive(pids: list[int]) -> list[int]:
    """The pids still running (a zombie, waiting for its reaper, is no longer running)."""
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
    return alive


@pytest.mark.timeout(60)
def test_an_idle_rank_with_a_busy_grandchild_is_working() -> None:
    proc = subprocess.Popen([sys.executable, "-c", IDLE_PARENT])
    try:
        time.sleep(1.0)  # the grandchild is running
        own, children = sample_twice(proc.pid)
        assert own is not None and own < 10.0
        assert children is not None and children > 40.0  # one core spinning, shared box
    finally:
        stop(proc)


@pytest.mark.timeout(60)
def test_a_busy_rank_is_not_asked_for_its_children() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY_PARENT])
    try:
        own, children = sample_twice(proc.pid)
        assert own is not None and own > 40.0 and children is None
    finally:
        stop(proc)
