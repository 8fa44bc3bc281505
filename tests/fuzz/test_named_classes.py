"""Every bad-input class named in issue 11, one case each: exit 2, one line, no traceback/hang.

Every case must pass: none is marked as an expected failure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from distrun.errors import DistrunError
from tests.fuzz.harness import Result, call_main, run_limited

pytestmark = pytest.mark.timeout(180)



@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "c.toml").write_text("master_port = 70000\n")
    (tmp_path / "neg.toml").write_text("nproc_per_node = -2\n")
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "events.jsonl").write_text("")
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


def bad(argv: list[str], env: dict[str, str] | None = None, says: str = "") -> Any:
    return ("main", argv, env or {}, says)


# (argv, env, text the one error line must contain): exit status 2 expected
IN_PROCESS = [
    pytest.param(["plan", "--master-port", "70000", "t.py"], {}, "70000",
                 id="master-port-70000"),
    pytest.param(["plan", "--master-port", "-5", "t.py"], {}, "-5",
                 id="master-port-negative"),
    pytest.param(["plan", "t.py"], {"PET_MASTER_PORT": "70000"}, "70000",
                 id="PET_MASTER_PORT-70000"),
    pytest.param(["plan", "--config", "c.toml", "t.py"], {}, "70000",
                 id="toml-master-port"),
    pytest.param(["plan", "--config", "neg.toml", "t.py"], {}, "-2",
                 id="toml-negative-nproc"),
    pytest.param(["monitor", "--once", "--metrics-port", "70000", "run"], {}, "70000",
                 id="metrics-port-70000"),
    pytest.param(["launch", "--dry-run", "--rdzv-conf", "garbage", "t.py"], {}, "garbage",
                 id="rdzv-conf-garbage"),
    pytest.param(["launch", "--dry-run", "--max-restarts", "-1", "t.py"], {}, "-1",
                 id="max-restarts-negative"),
    pytest.param(["launch", "--dry-run", "--local-ranks-filter", "abc", "t.py"], {}, "abc",
                 id="local-ranks-filter-abc"),
    pytest.param(["launch", "--dry-run", "--shutdown-timeout", "-1", "t.py"], {}, "-1",
                 id="shutdown-timeout-negative"),
    pytest.param(["plan", "--global-batch-size", "0", "t.py"], {}, "0",
                 id="global-batch-zero"),
    pytest.param(["plan", "--global-batch-size", "64", "--per-device-batch-size", "-8",
                  "t.py"], {}, "-8", id="per-device-batch-negative"),
    pytest.param(["launch", "--dry-run", "--master-wait", "-1", "t.py"], {}, "-1",
                 id="master-wait-negative"),
    pytest.param(["launch", "--dry-run", "t.py"], {"DISTRUN_MASTER_WAIT": "-1"}, "-1",
                 id="DISTRUN_MASTER_WAIT-negative"),
    pytest.param(["launch", "--dry-run", "--stall-timeout", "-1", "t.py"], {}, "-1",
                 id="stall-timeout-negative"),
    pytest.param(["launch", "--dry-run", "t.py"], {"DISTRUN_FORCE": "maybe"}, "DISTRUN_FORCE",
                 id="DISTRUN_FORCE-maybe"),
    pytest.param(["launch", "--dry-run", "t.py"], {"SLURM_JOB_ID": "abc", "SLURM_JOB_NODELIST":
                 "n[0-1]"}, "SLURM_JOB_ID='abc'", id="SLURM_JOB_ID-abc"),
    pytest.param(["launch", "--dry-run", "t.py"], {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST":
                 "n[["}, "n[[", id="nodelist-nested"),
    pytest.param(["launch", "--dry-run", "t.py"], {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST":
                 "n[0-99999999]"}, "more than 100000", id="nodelist-huge"),
    pytest.param(["plan", "--inventory", "99999999x8xH100", "t.py"], {}, "99999999",
                 id="inventory-huge"),
    pytest.param(["report", "-o", "/proc/x/r.html", "run"], {}, "/proc/x",
                 id="report-output-proc"),
    pytest.param(["report", "-o", "file/r.html", "run"], {}, "file",
                 id="report-output-under-a-file"),
    pytest.param(["export", "slurm", "--output", "/proc/x/job.sbatch", "t.py"], {}, "/proc/x",
                 id="export-output-proc"),
    pytest.param(["export", "shell", "--output", "file", "t.py"], {}, "file",
                 id="export-output-is-a-file"),
]


@pytest.mark.parametrize("argv, env, says", IN_PROCESS)
def test_bad_input_is_one_line_and_exit_2(work: Path, argv: list[str], env: dict[str, str],
                                          says: str) -> None:
    result = call_main(argv, work, env, timeout=60).check({2})
    line = next(x for x in result.err.splitlines() if ": error: " in x)
    assert says in line


def test_distrun_force_yes_is_accepted_like_distrun_json(work: Path) -> None:
    from distrun.cli.launch import parser

    assert parser({"DISTRUN_FORCE": "yes"}).parse_args(["t.py"]).force is True





def special(work: Path, name: str) -> str:
    return {"ls": "/bin/ls", "zero": "/dev/zero", "fifo": str(work / "fifo"),
            "dir": str(work)}[name]


FILES = ["ls", "zero", "fifo", "dir"]


def special_call(argv: list[str], work: Path, name: str) -> Result:
    """/dev/zero in a subprocess (a read could eat memory before a signal); the rest here, a
    blocked FIFO open broken by SIGALRM."""
    if name == "zero":
        return run_limited(argv, work, timeout=60)
    return call_main(argv, work, timeout=8)


@pytest.mark.parametrize("name", FILES)
def test_special_file_as_config(work: Path, name: str) -> None:
    special_call(["plan", "--config", special(work, name), "t.py"], work, name).check({2})


@pytest.mark.parametrize("name", FILES)
def test_special_file_as_hostfile(work: Path, name: str) -> None:
    special_call(["launch", "--dry-run", "--hostfile", special(work, name), "t.py"], work,
                 name).check({2})


@pytest.mark.parametrize("name", ["zero", "fifo"])
def test_special_file_as_log(work: Path, name: str) -> None:
    special_call(["diagnose", special(work, name)], work, name).check({2})


@pytest.mark.parametrize("command", [["monitor", "--json"], ["report", "-o", "-"]])
@pytest.mark.parametrize("name", FILES)
def test_special_file_as_run_events(work: Path, name: str, command: list[str]) -> None:
    """A run directory's events.jsonl planted as a FIFO, a folder, or a link to /bin/ls or
    /dev/zero: one line naming it, never a blocked or endless read."""
    events = work / "run" / "events.jsonl"
    events.unlink()
    if name == "fifo":
        os.mkfifo(events)
    elif name == "dir":
        events.mkdir()
    else:
        events.symlink_to(special(work, name))
    result = call_main([*command, "run"], work, timeout=8).check({2})
    assert "run/events.jsonl is a" in result.err


@pytest.mark.parametrize("argv", [
    ["plan", "--inventory", "99999999x8xH100", "t.py"],
    ["plan", "--inventory", "100000x1024xH100", "t.py"],
    ["plan", "--nproc-per-node", "99999999", "t.py"],
    ["plan", "--nnodes", "99999999", "--inventory", "1x8xH100", "t.py"],
])
def test_memory_bombs_are_refused_within_limits(work: Path, argv: list[str]) -> None:
    run_limited(argv, work, timeout=45).check({2})


def run_dirs(work: Path) -> dict[str, str]:
    ro = work / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    return {"file": str(work / "file"), "proc": "/proc/x/run", "long": "r" * 5000,
            "readonly": str(ro / "run")}


@pytest.mark.parametrize("kind", ["file", "proc", "long", "readonly"])
def test_unusable_run_dir_is_refused_before_starting(work: Path, kind: str) -> None:
    if kind == "readonly" and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    result = run_limited(["launch", "--nproc-per-node", "1", "--run-dir", run_dirs(work)[kind],
                          "t.py"], work, timeout=120).check({2})
    assert "hi" not in result.out  # the job did not start


@pytest.mark.parametrize("value", ["-1", "0", "nan", "abc"])
def test_pg_timeout_is_checked(value: str) -> None:
    from distrun.runtime.context import _timeout

    with pytest.raises(DistrunError, match="DISTRUN_PG_TIMEOUT"):
        _timeout(None, {"DISTRUN_PG_TIMEOUT": value})


