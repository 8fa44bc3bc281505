"""Calling the real CLI with hostile input: in-process (fast) or in a limited subprocess.

In-process: ``distrun.cli.main.main(argv)`` with the environment replaced, the working folder
a temporary one, stdout/stderr captured, and a SIGALRM deadline; nothing may escape ``main``
(a SystemExit carries the exit status argparse-style code would give) and nothing printed may
look like a traceback. Subprocess: for inputs that could block (FIFOs, /dev/zero) or eat
memory, with a wall-clock timeout and RLIMIT_AS.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from unittest import mock

from tests.conftest import cli_env

VALID_CODES = {0, 1, 2, 3}
MEMORY_LIMIT = 3 * 2**30


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err

    def check(self, codes: set[int] = VALID_CODES) -> Result:
        """Exit status in ``codes``, no traceback, an error is one line; returns self."""
        assert self.code in codes, f"exit {self.code} not in {codes}: {self.err[-2000:]}"
        # Python prints a traceback on stderr; stdout may quote a log's own ("diagnose" shows
        # a traceback's header as an error line, and where a log ends)
        assert "Traceback (most recent call last)" not in self.err, self.text[-3000:]
        errors = [line for line in self.err.splitlines() if ": error: " in line]
        assert len(errors) <= 1, self.err[-2000:]
        return self


class Deadline(BaseException):
    """Raised by SIGALRM inside a call that ran past its time."""


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: FrameType | None) -> None:
        raise Deadline(f"call ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def inside(cwd: Path, env: Mapping[str, str]) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with mock.patch.dict(os.environ, {**cli_env(), **env}, clear=True):
            yield
    finally:
        os.chdir(here)


def call_main(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None,
              timeout: int = 30) -> Result:
    """``main(argv)`` in this process; an escaped exception is a test failure with its trace."""
    from distrun.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with inside(cwd, env or {}), alarm(timeout), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Deadline:
        raise AssertionError(f"distrun {argv!r} ran past {timeout} s") from None
    except BaseException:
        raise AssertionError(f"exception escaped main({argv!r}):\n{traceback.format_exc()}"
                             ) from None
    return Result(code, out.getvalue(), err.getvalue())


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_limited(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None,
                timeout: float = 60) -> Result:
    """``python -m distrun.cli.main`` with RLIMIT_AS and a timeout (a hang is a failure)."""
    try:
        done = subprocess.run([sys.executable, "-m", "distrun.cli.main", *argv], cwd=cwd,
                              env=cli_env(dict(env or {})), capture_output=True, text=True,
                              timeout=timeout, check=False, preexec_fn=_limit_memory,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"distrun {argv!r} ran past {timeout} s (blocked?)") from None
    return Result(done.returncode, done.stdout, done.stderr)
