"""Fault: ranks that print faster than anyone reads. Every line reaches the rank log."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from distrun.launch.logs import StampedWriter, Tailer, private
from tests.conftest import cli_env, run_cli

SCRIPT = Path(__file__).parent / "scripts_flood.py"


def test_tailer_keeps_every_line_and_the_unterminated_last_one(tmp_path: Path) -> None:
    src = tmp_path / "raw.log"
    src.write_bytes(b"".join(b"line %d\n" % i for i in range(50_000)) + b"no newline at end")
    out = tmp_path / "rank.log"
    finished = threading.Event()
    finished.set()
    with open(out, "w", encoding="utf-8") as sink:
        tailer = Tailer(str(src), StampedWriter(sink, "out", threading.Lock(), None, ""),
                        finished, "t")
        tailer.run()
    lines = out.read_text().splitlines()
    assert len(lines) == 50_001 and tailer.lines == 50_001
    assert lines[0].endswith(" out line 0") and lines[-1].endswith(" out no newline at end")


def test_a_line_longer_than_a_chunk_is_kept_in_pieces(tmp_path: Path) -> None:
    src = tmp_path / "raw.log"
    src.write_bytes(b"y" * (3 * (1 << 20) + 5) + b"\nshort\n")
    out = tmp_path / "rank.log"
    finished = threading.Event()
    finished.set()
    with open(out, "w", encoding="utf-8") as sink:
        Tailer(str(src), StampedWriter(sink, "err", threading.Lock(), None, ""), finished,
               "t").run()
    text = out.read_text()
    assert text.count("y") == 3 * (1 << 20) + 5 and text.endswith(" err short\n")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_ranks_printing_a_million_lines_each_lose_none(tmp_path: Path, marker: str) -> None:
    run = tmp_path / "run"
    started = time.monotonic()
    done = run_cli(["launch", "--nproc-per-node", "2", "--run-dir", str(run), str(SCRIPT)],
                   tmp_path, timeout=280, env={"DISTRUN_TEST_MARK": marker})
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 270
    for rank in (0, 1):
        with open(run / "logs" / f"rank-{rank}.log", "rb") as log:
            count = sum(1 for line in log if b" out rank " in line)
        assert count == 1_000_000, f"rank {rank}: {count} of 1000000 lines"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["logs_complete"] is True


class GonePipe:
    """A console whose reader left: every write fails as a closed pipe does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False


def test_a_console_that_went_away_loses_no_rank_log_line(tmp_path: Path) -> None:
    out = tmp_path / "rank.log"
    with open(out, "w", encoding="utf-8") as sink:
        writer = StampedWriter(sink, "out", threading.Lock(), GonePipe(), "[0] ")  # type: ignore[arg-type]
        for i in range(100):
            writer.write_lines([f"step {i}\n"])
    assert len(out.read_text().splitlines()) == 100


@pytest.mark.timeout(180)
def test_launch_piped_into_head_keeps_every_line_and_the_job_status(
        tmp_path: Path, marker: str) -> None:
    """``distrun launch ... | head -1``: the reader leaves while the ranks still print; the
    job runs to the end, exits 0, every rank log is whole and no traceback is printed."""
    script = tmp_path / "talk.py"
    script.write_text("import os, time\nr = os.environ['RANK']\nfor i in range(40):\n"
                      "    print(f'rank {r} step {i}', flush=True)\n    time.sleep(0.02)\n")
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "distrun.cli.main", "launch",
                             "--nproc-per-node", "2", "--run-dir", str(run), str(script)],
                            cwd=tmp_path, env=cli_env({"DISTRUN_TEST_MARK": marker}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # like head -1
    _, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, err[-2000:]
    assert b"Traceback" not in err and b"BrokenPipeError" not in err
    for rank in (0, 1):
        lines = (run / "logs" / f"rank-{rank}.log").read_text().splitlines()
        assert sum(f"rank {rank} step" in line for line in lines) == 40


def test_a_node_relay_keeps_reading_after_the_console_went_away() -> None:
    """``--hostfile`` relays each node's ssh output; a console that went away must not stop
    the reading, or the node's ssh would block on a full pipe and the job with it."""
    from distrun.launch.fanout import _relay

    node = io.StringIO("".join(f"rank 3 step {i}\n" for i in range(10_000)))
    _relay(node, "[node1] ", GonePipe())  # type: ignore[arg-type]
    assert node.read() == ""  # every line was read


REMOTE_COLOURED = ("\x1b[1;32mepoch 0\x1b[0m loss 2.31\r\n"
                   "\x1b]0;user@node1: ~\x07\x1b[?25lrank 3 done\x1b[?25h\r\n")


def test_a_node_relay_into_a_file_drops_the_remote_terminal_codes(tmp_path: Path) -> None:
    """``ssh -tt`` gives the remote side a terminal, so its programs colour their output:
    the lines reach a file (or a pipe) here without the codes and the terminal's \\r."""
    from distrun.launch.fanout import _relay

    out = tmp_path / "console.txt"
    with open(out, "w", encoding="utf-8") as sink:
        _relay(io.StringIO(REMOTE_COLOURED), "[node1] ", sink)
    assert out.read_text(encoding="utf-8") == "[node1] epoch 0 loss 2.31\n[node1] rank 3 done\n"


def test_a_node_relay_into_a_terminal_keeps_the_colours() -> None:
    import os

    from distrun.launch.fanout import _relay

    primary, secondary = os.openpty()  # a real terminal
    try:
        with open(secondary, "w", encoding="utf-8", closefd=False) as sink:
            _relay(io.StringIO(REMOTE_COLOURED), "[node1] ", sink)
        shown = os.read(primary, 4096).decode()
    finally:
        os.close(primary)
        os.close(secondary)
    assert "\x1b[1;32mepoch 0\x1b[0m loss 2.31" in shown


def test_the_watcher_and_the_summary_survive_a_console_that_went_away(tmp_path: Path) -> None:
    """A node whose terminal hung up (its ssh ended) still writes its record: the watcher's
    last notices and the launch summary go to a console that fails every write (EIO)."""
    from distrun.cli.launch import Stderr
    from distrun.model.rundir import RunDir
    from distrun.monitor.watcher import LauncherActions

    run = RunDir.create(tmp_path / "run")
    actions = LauncherActions(run, out=GonePipe())  # type: ignore[arg-type]
    actions.say("distrun: verify: ok: 2/2 ranks joined")
    actions.record("job_finished", exitcode=129, status="interrupted")
    err = Stderr()
    err.out = GonePipe()  # type: ignore[assignment]
    err.print("distrun: job interrupted (received SIGHUP)")
    run.close()
    events = (tmp_path / "run" / "events.jsonl").read_text(encoding="utf-8")
    assert '"event": "job_finished"' in events


def test_private_follows_no_link_out_of_the_folder(tmp_path: Path) -> None:
    """What torchelastic made under <run>/torchrun becomes 0700/0600; a link planted there is
    neither followed nor changed, so nothing outside the run directory changes mode."""
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True, mode=0o755)
    (outside / "file").write_text("the user's")
    os.chmod(outside / "file", 0o644)
    root = tmp_path / "torchrun"
    (root / "id" / "attempt_0" / "0").mkdir(parents=True, mode=0o755)
    log = root / "id" / "attempt_0" / "0" / "stdout.log"
    log.write_text("")
    os.chmod(log, 0o644)
    (root / "id" / "link-to-file").symlink_to(outside / "file")
    (root / "id" / "link-to-folder").symlink_to(outside / "folder")
    os.mkfifo(root / "id" / "fifo", 0o644)
    private(root)
    mode = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(os.lstat(p).st_mode)
            for p in [root, *root.rglob("*"), *outside.rglob("*")] if not p.is_symlink()}
    assert mode == {"torchrun": 0o700, "torchrun/id": 0o700, "torchrun/id/attempt_0": 0o700,
                    "torchrun/id/attempt_0/0": 0o700, "torchrun/id/attempt_0/0/stdout.log": 0o600,
                    "torchrun/id/fifo": 0o644, "outside/folder": 0o755, "outside/file": 0o644}
    assert (root / "id" / "link-to-file").is_symlink()
