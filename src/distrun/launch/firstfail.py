"""Which rank failed first: the earliest error that is a cause, not a consequence.

torchelastic names the failed rank with the smallest exit time (often rank 0, which died in a
collective because another rank had already raised). The rank logs carry microsecond time
stamps: the first failure is the rank whose error came first among those whose error is a
cause; an error that only reports another rank's end (connection closed or reset by peer, a
timeout, SIGTERM from the launcher, a NCCL/gloo watchdog) is a consequence.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from distrun.model.record import JobOutcome, RankFailure

TAIL_BYTES = 1 << 20  # only the end of each rank log is read
_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6})Z err (?:\[rank\d+\]: )?(.*)$")
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Failure))\b(:.*)?$")
_CONSEQUENCE = re.compile(
    r"connection (closed|reset) by peer|broken pipe|timed? ?out|timeout|sigterm|watchdog"
    r"|nccl.*(abort|error)|gloo.*(abort|closed)|signal 15|socket closed|peer.*(closed|gone)",
    re.IGNORECASE)
_SIGNALLED = (128 + 1, 128 + 2, 128 + 15)  # a rank that ended on SIGHUP/SIGINT/SIGTERM itself


@dataclass(frozen=True)
class LogError:
    """A rank's first error as its log shows it: when it began and its exception line."""

    time: float
    line: str


def is_consequence(failure: RankFailure, error: LogError | None) -> bool:
    """True when the rank's error reports another rank's end rather than a fault of its own."""
    if failure.signal in ("SIGTERM", "SIGINT", "SIGHUP") or failure.exitcode in _SIGNALLED:
        return True
    text = error.line if error is not None else failure.message
    return bool(_CONSEQUENCE.search(text))


def pick_first(failures: tuple[RankFailure, ...], errors: dict[int, LogError],
               fallback: int | None) -> int | None:
    """The first failure's rank: the earliest cause; else the earliest error; else
    ``fallback`` (torchelastic's choice)."""
    if not failures:
        return fallback

    def when(failure: RankFailure) -> tuple[float, int]:
        error = errors.get(failure.rank)
        if error is not None:
            return (error.time, failure.rank)
        return (failure.time if failure.time is not None else float("inf"), failure.rank)

    causes = [f for f in failures if not is_consequence(f, errors.get(f.rank))]
    timed = [f for f in failures if f.rank in errors or f.time is not None]
    pool = causes or timed
    if not pool:
        return fallback
    return min(pool, key=when).rank


def first_error(path: Path) -> LogError | None:
    """The first error in the end of a rank log: the time its traceback (or exception line)
    began, and the exception line that ended it. None when the log shows none."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read(TAIL_BYTES)
    except OSError:
        return None
    began: float | None = None
    for raw in data.decode("utf-8", errors="replace").splitlines():
        match = _LINE.match(raw)
        if match is None:
            continue
        text = match.group(2)
        if began is None and (text.startswith("Traceback ") or _RAISED.match(text)):
            began = _stamp(match.group(1))
        if began is not None and _RAISED.match(text):
            return LogError(began, text.strip()[:500])
    return None


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=timezone.utc).timestamp()


def reorder(outcome: JobOutcome, logs: Path) -> JobOutcome:
    """``outcome`` with the first failure chosen from the rank logs (see the module text):
    the ``first`` flags, ``first_failure``, the exit status and the message agree."""
    if not outcome.failures:
        return outcome
    errors = {}
    for failure in outcome.failures:
        error = first_error(logs / f"rank-{failure.rank}.log")
        if error is not None:
            errors[failure.rank] = error
    first = pick_first(outcome.failures, errors, outcome.first_failure)
    failures = tuple(replace(f, first=f.rank == first) for f in outcome.failures)
    chosen = next((f for f in failures if f.first), None)
    if chosen is None:
        return outcome
    code = chosen.exitcode if chosen.exitcode > 0 else 128 - chosen.exitcode
    own = errors.get(chosen.rank)
    torn_down = chosen.exitcode in (*_SIGNALLED, -1, -2, -15) or chosen.signal in (
        "SIGTERM", "SIGINT", "SIGHUP")
    if torn_down and own is not None and not _CONSEQUENCE.search(own.line):
        # its own error came first; the SIGTERM was the launcher's teardown racing its exit:
        # report the status of a failed Python process, not the teardown's signal
        code = 1
    message = chosen.message
    if message.startswith(("exited with code", "killed by")) and chosen.rank in errors:
        message = errors[chosen.rank].line
    return replace(outcome, exitcode=code, failures=failures, first_failure=first,
                   message=message)
