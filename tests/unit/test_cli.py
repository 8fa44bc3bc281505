"""The CLI as a user sees it: exit statuses, one-line errors, the plan JSON contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env, run_cli
from tests.fuzz.harness import call_main


def assert_one_line_usage_error(done, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "fix" in lines[0]
    for needle in needles:
        assert needle in lines[0]


def test_issue_check_sixteen_on_eight_per_node(tmp_path: Path) -> None:
    done = run_cli(["plan", "--inventory", "2x8xH100-80GB", "--nnodes", "2", "--nproc-per-node",
                    "16", "--json", "train.py"], tmp_path)
    assert done.returncode == 3
    plan = json.loads(done.stdout)
    errors = [f for f in plan["findings"] if f["severity"] == "error"]
    assert errors and "16" in errors[0]["message"] and "8" in errors[0]["message"]


def test_issue_check_two_by_eight_plan_json(tmp_path: Path) -> None:
    done = run_cli(["plan", "--inventory", "2x8xH100-80GB", "--nnodes", "2", "--nproc-per-node",
                    "8", "--json", "train.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert {"world_size", "backend", "master_addr", "master_port", "nodes", "findings",
            "commands"} <= set(plan)
    assert plan["world_size"] == 16 and plan["backend"] == "nccl"
    assert plan["nodes"][0]["ranks"] == list(range(8))
    assert plan["nodes"][1]["ranks"] == list(range(8, 16))
    assert all(len(n["visible_devices"]) == 8 for n in plan["nodes"])
    assert all(set(n) >= {"node_rank", "host", "nproc", "visible_devices", "ranks"}
               for n in plan["nodes"])
    assert len(plan["commands"]) == 2
    assert all(set(f) >= {"id", "severity", "message", "fix"} for f in plan["findings"])


def test_plan_human_output_names_the_fix(tmp_path: Path) -> None:
    done = run_cli(["plan", "--inventory", "1x8xgcu", "--nproc-per-node", "1", "t.py"], tmp_path)
    assert done.returncode == 0
    assert "7 device(s) per node will sit idle" in done.stdout
    assert "--nproc-per-node 8" in done.stdout


def test_passthrough_torchrun_flags_reach_the_commands(tmp_path: Path) -> None:
    done = run_cli(["plan", "--inventory", "2x8xH100", "--nnodes", "2", "--max-restarts", "3",
                    "--json", "train.py", "--lr", "0.1"], tmp_path)
    plan = json.loads(done.stdout)
    assert "--max-restarts 3" in plan["commands"][0]
    assert plan["commands"][0].endswith("train.py --lr 0.1")


@pytest.mark.parametrize(("args", "needles"), [
    (["plan", "--bogus", "t.py"], ["--bogus"]),
    (["plan", "--inventory", "2x8xWidget", "t.py"], ["2x8xWidget"]),
    (["plan", "--inventory", "8by2", "t.py"], ["8by2"]),
    (["plan", "--nnodes", "two", "t.py"], ["two"]),
    (["plan", "--nproc-per-node", "0", "t.py"], ["--nproc-per-node 0"]),
    (["launch", "--nproc-per-node", "2", "missing_script.py"], ["missing_script.py"]),
    (["launch", "--inventory", "1x8xH100", "t.py"], ["--inventory"]),
    (["frobnicate"], ["frobnicate"]),
    (["plan"], ["training_script"]),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    assert_one_line_usage_error(run_cli(args, tmp_path), *needles)


def test_bad_distrun_env_variable(tmp_path: Path) -> None:
    done = run_cli(["plan", "t.py"], tmp_path, env={"DISTRUN_GLOBAL_BATCH_SIZE": "lots"})
    assert_one_line_usage_error(done, "DISTRUN_GLOBAL_BATCH_SIZE")


def test_distrun_env_variable_sets_a_flag(tmp_path: Path) -> None:
    done = run_cli(["plan", "--inventory", "1x8xH100", "--json", "t.py"], tmp_path,
                   env={"DISTRUN_GLOBAL_BATCH_SIZE": "100"})
    ids = [f["id"] for f in json.loads(done.stdout)["findings"]]
    assert done.returncode == 3 and "batch-indivisible" in ids


def test_doctor_json_reports_this_host(tmp_path: Path) -> None:
    done = run_cli(["doctor", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["node"]["vendor"] == "cpu" and data["devices"]["cpu"]["status"] == "found"
    assert data["backends"]["gloo"] is True and data["software"]["torch"].startswith("2.13")
    assert data["cluster"]["environment"] == "single"
    assert any(i["name"] == "lo" for i in data["interfaces"])
    assert data["devices"]["nvidia"]["status"] == "absent"


def test_dry_run_starts_nothing(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("raise SystemExit('must not run')\n")
    done = run_cli(["launch", "--dry-run", "--nproc-per-node", "2", str(script)], tmp_path)
    assert done.returncode == 0 and "world size 2" in done.stdout
    assert not (tmp_path / "runs").exists()


def test_launch_refuses_on_preflight_error(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("raise SystemExit('must not run')\n")
    done = run_cli(["launch", "--backend", "nccl", str(script)], tmp_path)
    assert done.returncode == 3
    assert "backend nccl needs" in done.stderr and "refusing to start" in done.stderr


def test_config_file_sets_defaults_and_flags_win(tmp_path: Path) -> None:
    (tmp_path / "job.toml").write_text('nproc_per_node = 3\nbackend = "gloo"\nmax_restarts = 2\n')
    base = ["plan", "--config", "job.toml", "--inventory", "1x4xcpu", "--json"]
    plan = json.loads(run_cli([*base, "t.py"], tmp_path).stdout)
    assert plan["nproc_per_node"] == 3 and "--max-restarts 2" in plan["commands"][0]
    plan = json.loads(run_cli([*base, "--nproc-per-node", "2", "t.py"], tmp_path).stdout)
    assert plan["nproc_per_node"] == 2


@pytest.mark.parametrize(("text", "needle"), [
    ("nproc_per_nod = 3\n", "'nproc_per_nod' is not a setting"),
    ('master_port = "abc"\n', "master_port = 'abc'"),
    ("x = [\n", "not valid TOML"),
    (None, "cannot read config"),
])
def test_bad_config_is_one_line(tmp_path: Path, text: str | None, needle: str) -> None:
    if text is not None:
        (tmp_path / "job.toml").write_text(text)
    done = run_cli(["plan", "--config", "job.toml", "t.py"], tmp_path)
    assert_one_line_usage_error(done, needle, "job.toml")


def test_plan_and_doctor_work_without_torch(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named torch (test)')\n")
    # this checkout's src, absolute: a relative PYTHONPATH entry misses from tmp_path and the
    # installed distrun would be the one tested
    env = {"PYTHONPATH": os.pathsep.join([str(blocker.parent), str(REPO / "src")])}
    done = run_cli(["plan", "--inventory", "2x8xH100", "--nnodes", "2", "--json", "t.py"],
                   tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["world_size"] == 16
    doctor = run_cli(["doctor", "--json"], tmp_path, env=env)
    assert doctor.returncode == 0, doctor.stderr
    assert json.loads(doctor.stdout)["software"]["torch"] is None
    launch = run_cli(["launch", "t.py"], tmp_path, env=env)
    assert_one_line_usage_error(launch, "torch is not installed")


def test_a_path_the_command_cannot_use_is_one_line(tmp_path: Path) -> None:
    # demo where ./runs is a file; diagnose of a run directory whose rank log is a folder
    (tmp_path / "runs").write_text("x")
    demo = run_cli(["demo"], tmp_path)
    assert demo.returncode == 2 and "Traceback" not in demo.stderr, demo.stderr
    assert demo.stderr.startswith("distrun demo: error: cannot create the folder runs")
    assert "fix: run distrun demo from a folder where it can create runs/" in demo.stderr
    assert (tmp_path / "runs").read_text() == "x"
    (tmp_path / "run" / "logs" / "rank-1.log").mkdir(parents=True)
    (tmp_path / "run" / "events.jsonl").write_text("")
    diag = run_cli(["diagnose", "run"], tmp_path)
    assert diag.returncode == 2 and diag.stderr.count("\n") == 1, diag.stderr
    assert diag.stderr.startswith("distrun diagnose: error: run/logs/rank-1.log is a directory, "
                                  "not a regular file")
    # a link planted as a rank log is named, not followed (a FIFO would have blocked)
    (tmp_path / "run" / "logs" / "rank-1.log").rmdir()
    (tmp_path / "run" / "logs" / "rank-1.log").symlink_to("/etc/hostname")
    diag = run_cli(["diagnose", "run"], tmp_path)
    assert diag.returncode == 2 and diag.stderr.count("\n") == 1, diag.stderr
    assert diag.stderr.startswith("distrun diagnose: error: run/logs/rank-1.log is a symbolic "
                                  "link, not a regular file")
    (tmp_path / "run" / "logs" / "rank-1.log").unlink()
    os.mkfifo(tmp_path / "run" / "logs" / "rank-2.log")
    diag = run_cli(["diagnose", "run"], tmp_path)
    assert diag.returncode == 2 and diag.stderr.startswith(
        "distrun diagnose: error: run/logs/rank-2.log is a FIFO (named pipe), not a regular file")


def closed_stdout(args: list[str], cwd: Path) -> tuple[int, str]:
    """``distrun ARGS | head -0``: the reader of stdout is gone before the first write."""
    entry = "import sys; from distrun.cli.main import entry; sys.argv[0] = 'distrun'; entry()"
    proc = subprocess.Popen([sys.executable, "-c", entry, *args], cwd=cwd, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()  # a no-op when it ended; never left behind
    return proc.returncode, err


@pytest.mark.parametrize("args", [
    ["doctor"], ["plan", "t.py"], ["launch", "--dry-run", "t.py"], ["export", "slurm", "t.py"],
    ["export", "shell", "t.py"], ["monitor", "--once", "run"], ["estimate", "--params", "7B"],
    ["--help"], ["doctor", "--help"], ["launch", "--help"], ["diagnose", "--help"],
], ids=lambda a: "-".join(a[:2]))
def test_a_closed_stdout_ends_every_command_quietly_with_141(tmp_path: Path,
                                                             args: list[str]) -> None:
    """rich's console, used by doctor/plan/launch/monitor, ended with exit 1 on a closed pipe,
    and export reported '--output None: Broken pipe'; every command is quiet and 141 now."""
    (tmp_path / "t.py").write_text("print('hi')\n")
    (tmp_path / "run" / "logs").mkdir(parents=True)
    (tmp_path / "run" / "events.jsonl").write_text("")
    code, err = closed_stdout(args, tmp_path)
    assert code == 141, err
    assert "Traceback" not in err and "Broken pipe" not in err and "error" not in err, err
    assert not (tmp_path / "runs").exists()


def test_a_folder_given_as_the_script_is_called_a_folder(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    done = call_main(["launch", "--dry-run", "project"], tmp_path).check({2})
    assert done.err == ("distrun launch: error: training script 'project' is a directory; "
                        "expected a Python file to run; fix: pass the script in it (e.g. "
                        "project/train.py), or -m PACKAGE.MODULE for a module\n")


@pytest.mark.parametrize(("word", "inventory", "says"), [
    ("gpu", "1x8xcpu", "--nproc-per-node gpu asks for one process per GPU (or other "
     "accelerator), but the declared inventory has none (no accelerator found)"),
    ("xpu", "1x8xcpu", "--nproc-per-node xpu asks for one process per Intel XPU"),
    ("xpu", "1x4xH100", "the declared inventory has none (it has 4 NVIDIA device(s))"),
])
def test_nproc_per_node_naming_a_device_that_is_not_there_is_refused(
        tmp_path: Path, word: str, inventory: str, says: str) -> None:
    """torchrun refuses 'gpu' without CUDA ("Cuda is not available."); distrun planned one CPU
    process without a word, and took 'xpu' (in torchrun's help) for a bad number."""
    done = call_main(["plan", "--inventory", inventory, "--nproc-per-node", word, "t.py"],
                     tmp_path).check({2})
    assert says in done.err and "fix: pass --nproc-per-node N" in done.err


@pytest.mark.parametrize(("word", "inventory", "nproc"), [
    ("xpu", "1x4xpvc", 4), ("gpu", "1x8xH100", 8), ("gpu", "1x2xMI300X", 2)])
def test_nproc_per_node_gpu_and_xpu_count_the_devices(tmp_path: Path, word: str,
                                                      inventory: str, nproc: int) -> None:
    done = call_main(["plan", "--inventory", inventory, "--nproc-per-node", word, "--json",
                      "t.py"], tmp_path).check({0})
    assert json.loads(done.out)["nproc_per_node"] == nproc


def test_demo_help_is_demos_own(tmp_path: Path) -> None:
    done = call_main(["demo", "--help"], tmp_path).check({0})
    assert done.out.startswith("usage: distrun demo [launch flags]\n")
    assert "A real small training run on whatever is here" in done.out
    assert "--stall-timeout" in done.out and "training_script" not in done.out
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("args", "says"), [
    (["--bogus"], "distrun demo: error: unrecognized arguments: --bogus; fix: see 'distrun "
                  "demo --help'"),
    (["--inventory", "1x2xcpu"], "distrun demo: error: --inventory 1x2xcpu declares other "
                                 "machines"),  # refused by launch, after demo made its folder
    (["--master-wait", "-1"], "distrun demo: error: --master-wait -1 is out of range"),
])
def test_a_demo_usage_error_leaves_nothing_behind(tmp_path: Path, args: list[str],
                                                  says: str) -> None:
    done = call_main(["demo", *args], tmp_path).check({2})
    assert done.err.startswith(says), done.err
    assert not (tmp_path / "runs").exists()
    (tmp_path / "runs").mkdir()  # a runs/ folder of the user's stays
    call_main(["demo", *args], tmp_path).check({2})
    assert (tmp_path / "runs").is_dir() and not any((tmp_path / "runs").iterdir())
