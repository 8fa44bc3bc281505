"""The launcher's guardian: when ``distrun launch`` itself dies (``kill -9``, the OOM killer),
no rank and no process a rank started keeps running, and the run is marked as ended.

``start`` spawns a small process in its own session that holds the read end of a pipe whose
write end only the launcher has. When the launcher ends normally it says ``done`` first; end of
file without ``done`` means the launcher is gone. The guardian then ends every process of the
job: those it saw under the launcher (recorded with their start times, so a reused pid is left
alone) and every process carrying the job's ``DISTRUN_RUN_ID`` in its environment (a rank's
``setsid`` child or double-forked daemon inherits it), SIGTERM first, SIGKILL after a grace
period; and it appends ``launcher_lost`` and ``job_finished`` (status ``ended-abnormally``) to
the run's events and writes ``summary.json`` when the launcher had not.

The guardian never touches a job whose launcher is alive, and its own failures only cost the
clean-up, never the job.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RUN_ID_VAR = "DISTRUN_RUN_ID"
POLL_S = 0.5
GRACE_S = 2.0


class Guardian:
    """The launcher's handle: ``release`` on a normal end, so the guardian leaves quietly."""

    def __init__(self, proc: subprocess.Popen[bytes] | None, write_fd: int | None) -> None:
        self.proc, self.write_fd = proc, write_fd

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def release(self) -> None:
        if self.write_fd is None:
            return
        with contextlib.suppress(OSError):  # the guardian is already gone: nothing to release
            os.write(self.write_fd, b"done\n")
        os.close(self.write_fd)
        self.write_fd = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start(run_path: Path, env: dict[str, str] | None = None) -> Guardian:
    """Spawn the guardian for this launcher; the run id goes into ``env`` (os.environ by default)
    so every rank and its children carry it."""
    target = os.environ if env is None else env
    target.setdefault(RUN_ID_VAR, uuid.uuid4().hex)
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "distrun.launch.guardian", str(os.getpid()),
             target[RUN_ID_VAR], str(run_path)],
            stdin=read_fd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        print(f"distrun: warning: no guardian for this launch ({exc}); if the launcher is "
              "killed, its ranks may keep running", file=sys.stderr)
        return Guardian(None, None)
    os.close(read_fd)
    return Guardian(proc, write_fd)


@contextmanager
def guarded(run_path: Path) -> Iterator[Guardian]:
    guard = start(run_path)
    try:
        yield guard
    finally:
        guard.release()


# --- the guardian process ---------------------------------------------------------------

def _seen_under(launcher: int, seen: dict[int, float]) -> None:
    import psutil

    try:
        for proc in psutil.Process(launcher).children(recursive=True):
            seen.setdefault(proc.pid, proc.create_time())
    except psutil.Error:
        return


def _job_processes(run_id: str, seen: dict[int, float]) -> list[object]:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "create_time", "environ"]):
        if proc.pid == os.getpid():
            continue
        created = seen.get(proc.pid)
        environ = proc.info.get("environ") or {}
        if (created is not None and abs(created - proc.info["create_time"]) < 0.01) or \
                environ.get(RUN_ID_VAR) == run_id:
            found.append(proc)
    return found


def _end(procs: list[object]) -> int:
    import psutil

    from distrun.launch.reaper import end

    alive: list[psutil.Process] = [p for p in procs if isinstance(p, psutil.Process)]
    end(alive, GRACE_S)
    return len(alive)


def _record(run: Path, launcher: int, ended: int) -> None:
    """Append to the events file and write the summary if missing (never through a link)."""
    from distrun.model.rundir import RunDirError, event_line, open_append, write_json

    message = f"the launcher (pid {launcher}) was killed; its guardian ended {ended} process(es)"
    try:
        fd = open_append(run / "events.jsonl")
        with os.fdopen(fd, "ab") as out:
            out.write(event_line("launcher_lost", {"pid": launcher, "ended": ended}))
            out.write(event_line("job_finished", {"exitcode": 137, "status": "ended-abnormally",
                                                  "message": message}))
        if not os.path.lexists(run / "summary.json"):
            write_json(run / "summary.json", {"status": "ended-abnormally", "exitcode": 137,
                                              "message": message})
    except (RunDirError, OSError):
        return  # the record is best effort; the processes are already ended


def _watch(launcher: int, run_id: str, run: Path) -> int:
    seen: dict[int, float] = {}
    while True:
        ready, _, _ = select.select([0], [], [], POLL_S)
        if not ready:
            _seen_under(launcher, seen)
            continue
        data = os.read(0, 64)
        if data.startswith(b"done"):
            return 0
        if data:
            continue
        ended = _end(_job_processes(run_id, seen))  # end of file without "done"
        _record(run, launcher, ended)
        return 0


if __name__ == "__main__":
    sys.exit(_watch(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])))
