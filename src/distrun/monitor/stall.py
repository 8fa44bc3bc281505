"""Stall detection from heartbeat ages, stack dumps of stuck ranks, and the verdict.

A rank is stalled when its heartbeat (``ctx.step``) is older than the stall timeout, or when
it joined but never beat within the timeout after the first rank started beating. Its stack
comes from ``py-spy dump`` where that works, else from faulthandler: the runtime registers
``faulthandler.register(SIGUSR1)``, and SIGUSR1 is sent only to a process whose
``/proc/<pid>/status`` shows it catches SIGUSR1 (the default action would kill it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from distrun.monitor.procs import signal_caught
from distrun.monitor.state import RankState

COLLECTIVE = re.compile(r"torch[/\\]distributed[/\\]")
FRAME = re.compile(r'^\s*(File ".*", line \d+ in .*|\S.*\(.*:\d+\))\s*$')
DUMP_WAIT_S = 2.0
THREAD = re.compile(r'^Thread (0x)?[0-9a-f]+ ')  # a thread's header, py-spy or faulthandler
OURS = re.compile(r'^Thread \d+ \([^)]*\): "distrun-')
# What a stuck rank's stack says about the wait, in py-spy's ("wait (torch/utils/x.py:48)")
# and faulthandler's ('File ".../torch/utils/x.py", line 48 in wait') frame formats alike.
HINTS = (
    (re.compile(r"torch[/\\]utils[/\\]file_baton\.py"),
     "waits for the lock of a JIT-built C++/CUDA extension (torch.utils.cpp_extension, as "
     "DeepSpeed ops use): another build holds it, or a build that was killed left it behind; "
     "if no build runs, delete the 'lock' file in that extension's folder under "
     "$TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions)"),
    (re.compile(r"filelock[/\\]_(api|unix|windows)\.py"),
     "waits for a filelock (Hugging Face caches use them): another process holds the '.lock' "
     "file, or a process that was killed left it on storage that keeps locks (NFS); remove "
     "the stale .lock file or give each node its own cache (HF_HOME)"),
    (re.compile(r"torch[/\\]utils[/\\]data[/\\]dataloader\.py"),
     "waits for its DataLoader workers (their processes do the work: a slow first batch from "
     "slow storage, or workers stuck; py-spy dump --pid on a worker shows where)"),
    (re.compile(r"(^|[/\\ (])(pdb|bdb)\.py"),
     "stopped in the Python debugger (breakpoint() or pdb.set_trace()): a rank under a "
     "launcher has no terminal to take the command; remove the breakpoint or debug one rank "
     "outside the launcher"),
)


@dataclass(frozen=True)
class Stack:
    text: str
    method: str

    @property
    def in_collective(self) -> bool:
        return bool(COLLECTIVE.search(self.text))

    def shown(self) -> str:
        """The stack without distrun's own threads (py-spy names them ``distrun-...``)."""
        out, ours = [], False
        for line in self.text.splitlines():
            if OURS.match(line) or THREAD.match(line):
                ours = bool(OURS.match(line))
            if not ours:
                out.append(line)
        return "\n".join(out).rstrip()

    def hint(self) -> str:
        """What the stack says the rank waits for, when it is a known trap ("" otherwise)."""
        return next((text for pattern, text in HINTS if pattern.search(self.text)), "")

    def top(self) -> str:
        """The innermost frame of the first thread listed (faulthandler / py-spy)."""
        for line in self.text.splitlines():
            if FRAME.match(line):
                return line.strip()
        return ""


def stalled(ranks: Mapping[int, RankState], now: float, timeout_s: float) -> list[RankState]:
    beating = [s.first_beat for s in ranks.values() if s.first_beat is not None]
    out = []
    for state in ranks.values():
        if state.exited or state.stalled:
            continue
        if state.beat_time is not None:
            if now - state.beat_time > timeout_s:
                out.append(state)
        elif state.joined_at is not None and beating:
            since = max(min(beating), state.joined_at)
            if now - since > timeout_s:
                out.append(state)
    return sorted(out, key=lambda s: s.rank)


def py_spy() -> str | None:
    found = shutil.which("py-spy")
    beside = Path(sys.executable).parent / "py-spy"
    return found or (str(beside) if beside.exists() else None)


def dump_stacks(states: Sequence[RankState], logs: Path) -> dict[int, Stack]:
    """A stack per rank: py-spy first, faulthandler through the rank's log otherwise."""
    out: dict[int, Stack] = {}
    spy = py_spy()
    for state in states:
        if state.pid and spy:
            text = _spy(spy, state.pid)
            if text:
                out[state.rank] = Stack(text, "py-spy")
    rest = [s for s in states if s.rank not in out and s.pid
            and signal_caught(s.pid, signal.SIGUSR1)]
    out.update(_faulthandler(rest, logs))
    return out


def _spy(spy: str, pid: int) -> str:
    try:
        done = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _faulthandler(states: Sequence[RankState], logs: Path) -> dict[int, Stack]:
    offsets = {}
    for state in states:
        log = logs / f"rank-{state.rank}.log"
        offsets[state.rank] = log.stat().st_size if log.exists() else 0
        try:
            os.kill(int(state.pid or 0), signal.SIGUSR1)
        except OSError:
            offsets.pop(state.rank)
    deadline = time.monotonic() + DUMP_WAIT_S
    found: dict[int, Stack] = {}
    while offsets and time.monotonic() < deadline:
        time.sleep(0.2)
        for rank, offset in list(offsets.items()):
            text = _dump_in_log(logs / f"rank-{rank}.log", offset)
            if text and FRAME.search(text.splitlines()[-1] or ""):
                found[rank] = Stack(text, "faulthandler")
    return found


def _dump_in_log(log: Path, offset: int) -> str:
    """The faulthandler dump written to the rank's stderr after ``offset``."""
    try:
        with open(log, encoding="utf-8", errors="replace") as fh:
            fh.seek(offset)
            lines = fh.read().splitlines()
    except OSError:
        return ""
    err = [ln.split(" ", 2)[2] for ln in lines
           if ln.count(" ") >= 2 and ln.split(" ", 2)[1] == "err"]
    start = next((i for i, ln in enumerate(err) if "most recent call first" in ln), None)
    return "\n".join(err[start:]) if start is not None else ""


def culprits(states: Sequence[RankState], stacks: Mapping[int, Stack]) -> list[RankState]:
    """Ranks stuck outside a collective hold the others up; else the lowest step."""
    outside = [s for s in states if s.rank in stacks and not stacks[s.rank].in_collective]
    if outside:
        return outside
    steps = [s.step if s.step is not None else -1 for s in states]
    low = min(steps, default=-1)
    return [s for s, step in zip(states, steps, strict=True) if step == low]


def verdict(states: Sequence[RankState], stacks: Mapping[int, Stack], now: float,
            timeout_s: float, stopping: bool) -> tuple[list[RankState], str]:
    """The culprit ranks and the one-paragraph verdict naming them."""
    blamed = culprits(states, stacks)
    waiting = [s for s in states if s not in blamed and s.rank in stacks
               and stacks[s.rank].in_collective]
    parts = []
    for s in blamed:
        age = s.age_s(now)
        step = "no step reported" if s.step is None else f"last step {s.step}"
        quiet = f"no heartbeat for {age:.1f} s" if age is not None else "never beat"
        where = stacks[s.rank].top() if s.rank in stacks else ""
        parts.append(f"{s.where()} stalled: {quiet} ({step}, --stall-timeout "
                     f"{timeout_s:g} s)" + (f"; it hangs at {where}" if where else ""))
    text = "; ".join(parts)
    all_waiting = stacks and all(stacks[s.rank].in_collective for s in blamed if s.rank in stacks)
    if all_waiting and len(blamed) == len(states):
        text += ("; every stalled rank here waits in a collective: the rank holding them up is "
                 "not on this node (another node that died or hangs, or a rank that exited)")
    elif waiting:
        text += f"; ranks {', '.join(str(s.rank) for s in waiting)} wait for it in a collective"
    text += ("; stopping the job (pass --stall-action warn to keep waiting)" if stopping
             else "; --stall-action warn: the job keeps running")
    return blamed, text
