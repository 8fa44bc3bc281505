"""When the hang watch stops a job by itself: only when waiting cannot succeed, at the
backend's own timeout, or after an explicit --stall-timeout; never with --stall-action warn.
And the proof line, as a pure function of the progress files and CPU use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrun.model.progress import RankProgress
from distrun.monitor.hang import HangVerdict, Kind
from distrun.monitor.hangwatch import HangConfig, HangWatch, proof


class FakeRun:
    def __init__(self, path: Path) -> None:
        self.path, self.logs = path, path / "logs"

    def event(self, name: str, **fields: Any) -> None: ...

    def write_json(self, name: str, data: Any) -> None: ...


def verdict(kind: Kind, waited: float, timeout: float | None = 1800.0) -> HangVerdict:
    return HangVerdict(kind, (1,), (0,), "0", 4, "gloo:all_reduce", (), waited, (), {}, timeout)


def watch(tmp_path: Path, **config: Any) -> HangWatch:
    return HangWatch(FakeRun(tmp_path), [0, 1], HangConfig(**config), stop_job=lambda pids: None)


def test_default_names_and_waits_until_the_backend_timeout(tmp_path: Path) -> None:
    w = watch(tmp_path)
    assert w._should_stop(verdict(Kind.BUSY, 90.0)) == (False, "")
    assert w._should_stop(verdict(Kind.IDLE, 1796.0)) == (
        True, "the backend's own timeout (1800 s) is about to fire")
    assert w._should_stop(verdict(Kind.MISMATCH, 10.0)) == (True, "waiting cannot succeed")
    assert w._should_stop(verdict(Kind.GONE, 0.5)) == (True, "waiting cannot succeed")


def test_stall_timeout_keeps_its_meaning_and_warn_never_stops(tmp_path: Path) -> None:
    assert watch(tmp_path, stall_timeout_s=30.0)._should_stop(verdict(Kind.BUSY, 31.0)) == (
        True, "no progress for 31 s (--stall-timeout 30)")
    assert watch(tmp_path, action="warn")._should_stop(verdict(Kind.GONE, 1.0))[0] is False


def rp(rank: int, device: str = "cpu", host: str = "h") -> RankProgress:
    return RankProgress(rank=rank, pid=10 + rank, host=host, device=device, joined_at=1.0)


def test_proof_lines() -> None:
    assert proof({0: rp(0), 1: rp(1)}, [0, 1], {0: 90.0, 1: 80.0}).message == (
        "2/2 ranks joined, each its own process (CPU), 2/2 processes busy")
    gpu = proof({0: rp(0, "cuda:0"), 1: rp(1, "cuda:1")}, [0, 1], {0: 50.0, 1: 0.0})
    assert (gpu.severity, gpu.message) == (
        "warning", "2/2 ranks joined, each on its own device (cuda:0, cuda:1), 1/2 ranks' "
        "processes busy; idle: rank(s) 1")
    shared = proof({0: rp(0, "cuda:0"), 1: rp(1, "cuda:0")}, [0, 1], {})
    assert shared.severity == "error" and "ranks 0 and 1 share cuda:0 on h" in shared.message
    missing = proof({0: rp(0)}, [0, 1], {})
    assert (missing.severity, missing.message) == (
        "warning", "1/2 ranks joined; rank(s) 1 created no process group")
