"""A run directory on shared storage may hold planted files: monitor and report never block on a
FIFO, never read through a link, and name what they found. An events.jsonl that is not a
regular file is one line and exit 2 (it used to block forever, or read as "starting"); any other
file of the run that is not a regular file is a warning naming it, and the rest is shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distrun.model import record
from tests.fuzz.harness import call_main
from tests.unit.test_monitor_view import SUCCEEDED, write_run

pytestmark = pytest.mark.timeout(60)  # a read that blocks on a FIFO fails, never hangs
COMMANDS = [["monitor", "--once"], ["monitor", "--json"], ["report", "-o", "-"]]
KINDS = {"fifo": "a FIFO (named pipe)", "dir": "a directory", "link": "a symbolic link"}


def plant(path: Path, kind: str, target: Path) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    else:
        path.symlink_to(target)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("kind", list(KINDS))
def test_events_that_is_not_a_regular_file_is_one_line_exit_2(tmp_path: Path, kind: str,
                                                              command: list[str]) -> None:
    run = write_run(tmp_path, SUCCEEDED)
    target = tmp_path / "elsewhere.jsonl"  # a real events file: a link to it is still refused
    target.write_bytes((run / "events.jsonl").read_bytes())
    plant(run / "events.jsonl", kind, target)
    result = call_main([*command, str(run)], tmp_path, timeout=10).check({2})
    assert result.out == ""
    assert result.err == (f"distrun {command[0]}: error: {run / 'events.jsonl'} is {KINDS[kind]}, "
                          "not a regular file: distrun reads only regular files of a run "
                          "directory (remove it, or pass another run)\n")


@pytest.mark.parametrize("name", ["samples.jsonl", "plan.json", "summary.json",
                                  "heartbeats/rank-0"])
def test_another_planted_fifo_is_a_warning_and_the_rest_is_shown(tmp_path: Path,
                                                                 name: str) -> None:
    run = write_run(tmp_path, SUCCEEDED)
    plant(run / name, "fifo", run)
    said = f"{run / name} is a FIFO (named pipe), not a regular file"
    shown = call_main(["monitor", "--once", str(run)], tmp_path, timeout=10).check({0})
    assert f"distrun monitor: warning: {'plan: ' if name == 'plan.json' else ''}{said}" \
        in shown.err and "succeeded" in shown.out
    page = call_main(["report", str(run), "-o", "-"], tmp_path, timeout=10).check({0}).out
    problems = page[page.index("<ul class='problems'>"):]
    assert said in problems and '<table id="ranks">' in page


def test_a_tail_of_a_fifo_reads_nothing_and_says_why(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "events.jsonl")
    tail = record.events(tmp_path / "events.jsonl")
    assert tail.read() == []
    assert tail.refused.endswith("events.jsonl is a FIFO (named pipe), not a regular file: "
                                 "distrun reads only regular files of a run directory (remove "
                                 "it, or pass another run)")
