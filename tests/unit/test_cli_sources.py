"""Settings from DISTRUN_*/PET_* variables and --config files, as the user sees them: a bad
value names the variable or the file and key it came from (never a flag that was not given),
and the config file takes every launch (and export) option."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.fuzz.harness import call_main


def error_line(argv: list[str], work: Path, env: dict[str, str] | None = None) -> str:
    """The one error line of a usage error (exit 2, no traceback)."""
    done = call_main(argv, work, env).check({2})
    assert done.err.count("\n") == 1, done.err
    return done.err


@pytest.mark.parametrize(("argv", "env", "line"), [
    (["plan", "t.py"], {"DISTRUN_GLOBAL_BATCH_SIZE": "0"},
     "distrun plan: error: from DISTRUN_GLOBAL_BATCH_SIZE: --global-batch-size 0 is out of "
     "range; expected at least 1; fix: unset DISTRUN_GLOBAL_BATCH_SIZE, or give it a valid "
     "value\n"),
    (["launch", "--dry-run", "t.py"], {"DISTRUN_MASTER_WAIT": "-1"},
     "distrun launch: error: from DISTRUN_MASTER_WAIT: --master-wait -1 is out of range; "
     "expected at least 0.001; fix: unset DISTRUN_MASTER_WAIT, or give it a valid value\n"),
    (["plan", "t.py"], {"PET_NNODES": "abc"},
     "distrun plan: error: from PET_NNODES: --nnodes 'abc' is not a number; expected N or "
     "MIN:MAX; fix: unset PET_NNODES, or give it a valid value\n"),
    (["plan", "t.py"], {"PET_MASTER_PORT": "99999"},
     "distrun plan: error: from PET_MASTER_PORT: --master-port 99999 is out of range; "
     "expected 1 to 65535; fix: unset PET_MASTER_PORT, or give it a valid value\n"),
    (["plan", "t.py"], {"PET_MAX_RESTARTS": "x"},
     "distrun plan: error: PET_MAX_RESTARTS='x' is not valid for --max-restarts; fix: unset "
     "PET_MAX_RESTARTS or give it a value --max-restarts accepts (see --help)\n"),
    (["plan", "t.py"], {"PET_START_METHOD": "threads"},  # was taken as it is
     "distrun plan: error: PET_START_METHOD='threads' is not one of spawn, fork, forkserver; "
     "fix: unset PET_START_METHOD or give it a valid value\n"),
    (["plan", "t.py"], {"PET_STANDALONE": "yes"},  # was a traceback from torch's parser
     "distrun plan: error: PET_STANDALONE='yes' is not a number; expected 0 or 1 (torchrun "
     "reads it with int()); fix: set PET_STANDALONE=1 (on) or PET_STANDALONE=0 (off), or "
     "unset it\n"),
    (["export", "slurm", "t.py"], {"DISTRUN_TIME": "soon"},
     "distrun export: error: from DISTRUN_TIME: --time 'soon' is not a Slurm time limit; "
     "expected MINUTES, HH:MM:SS or D-HH:MM:SS; fix: unset DISTRUN_TIME, or give it a valid "
     "value\n"),
    (["launch", "--dry-run", "t.py"], {"DISTRUN_HOSTFILE": "nohosts"},
     "distrun launch: error: from DISTRUN_HOSTFILE: cannot read hostfile 'nohosts': No such "
     "file or directory; expected a readable file; fix: pass the path of a file with 'host "
     "slots=N' lines; or unset DISTRUN_HOSTFILE, or give it a valid value\n"),
    (["plan", "t.py"], {"DISTRUN_CONFIG": "missing.toml"},
     "distrun plan: error: cannot read config (from DISTRUN_CONFIG) 'missing.toml': No such "
     "file or directory; expected a readable file; fix: unset DISTRUN_CONFIG, or point it at "
     "a TOML file of settings\n"),
])
def test_a_bad_variable_is_named_with_its_fix(tmp_path: Path, argv: list[str],
                                              env: dict[str, str], line: str) -> None:
    (tmp_path / "t.py").write_text("print('hi')\n")
    assert error_line(argv, tmp_path, env) == line


@pytest.mark.parametrize(("argv", "toml", "line"), [
    (["plan"], "global_batch_size = 0\n",
     "distrun plan: error: from config c.toml, key global_batch_size: --global-batch-size 0 is "
     "out of range; expected at least 1; fix: change global_batch_size in c.toml (or remove "
     "it)\n"),
    (["plan"], 'nnodes = "two"\n',
     "distrun plan: error: from config c.toml, key nnodes: --nnodes 'two' is not a number; "
     "expected N or MIN:MAX; fix: change nnodes in c.toml (or remove it)\n"),
    (["plan"], "max_restarts = 1.5\n",
     "distrun plan: error: config c.toml: max_restarts = 1.5 is not valid for --max-restarts; "
     "fix: change max_restarts in c.toml (see '--max-restarts' in --help), or remove it\n"),
    (["launch", "--dry-run"], "stall_timeout = -5\n",
     "distrun launch: error: config c.toml: stall_timeout = -5 is not valid for "
     "--stall-timeout; fix: change stall_timeout in c.toml (see '--stall-timeout' in --help), "
     "or remove it\n"),
    (["launch", "--dry-run"], 'stall_action = "pause"\n',
     "distrun launch: error: config c.toml: stall_action = 'pause' is not one of stop, warn; "
     "fix: change stall_action in c.toml (see '--stall-action' in --help), or remove it\n"),
    (["launch", "--dry-run"], 'force = "yes"\n',
     "distrun launch: error: config c.toml: force = 'yes' is not true or false (an on/off "
     "setting, like --force); fix: change force in c.toml (see '--force' in --help), or "
     "remove it\n"),
    (["export", "slurm"], 'time = "soon"\n',
     "distrun export: error: from config c.toml, key time: --time 'soon' is not a Slurm time "
     "limit; expected MINUTES, HH:MM:SS or D-HH:MM:SS; fix: change time in c.toml (or remove "
     "it)\n"),
    (["launch", "--dry-run"], "stall_timout = 60\n",
     "distrun launch: error: config c.toml: key 'stall_timout' is not a setting; expected the "
     "long options of 'distrun launch --help' and 'distrun export slurm --help', with _ for - "
     "(and a [train] table); fix: did you mean stall_timeout? correct or remove "
     "'stall_timout' in c.toml\n"),
])
def test_a_bad_config_value_names_the_file_and_key(tmp_path: Path, argv: list[str], toml: str,
                                                   line: str) -> None:
    (tmp_path / "c.toml").write_text(toml)
    assert error_line([*argv, "--config", "c.toml", "t.py"], tmp_path) == line


def test_a_value_given_as_a_flag_is_still_named_as_the_flag(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("global_batch_size = 8\n")
    line = error_line(["plan", "--config", "c.toml", "--global-batch-size", "0", "t.py"],
                      tmp_path, {"DISTRUN_GLOBAL_BATCH_SIZE": "4"})
    assert line == ("distrun plan: error: --global-batch-size 0 is out of range; expected at "
                    "least 1; fix: pass --global-batch-size a value from at least 1 (or leave "
                    "it out)\n")


LAUNCH_SETTINGS = """\
dry_run = true
nproc_per_node = 2
stall_timeout = 600
stall_action = "warn"
master_wait = 30
force = true
no_instrument = true
run_dir = "elsewhere"
max_restarts = 1
local_ranks_filter = "0,1"
duplicate_stdout_filters = ["loss", "step"]
time = "01:00:00"
"""


def test_the_config_file_holds_launch_settings(tmp_path: Path) -> None:
    """stall_timeout, stall_action, master_wait, force, ... were refused as 'not a setting'.
    dry_run = true in the file: the plan is printed, nothing starts, no run folder."""
    (tmp_path / "c.toml").write_text(LAUNCH_SETTINGS)
    (tmp_path / "t.py").write_text("raise SystemExit('must not run')\n")
    done = call_main(["launch", "--config", "c.toml", "--json", "t.py"], tmp_path).check({0})
    plan = json.loads(done.out)
    assert plan["nproc_per_node"] == 2
    assert plan["commands"][0].endswith("--max-restarts 1 --local-ranks-filter 0,1 "
                                        "--duplicate-stdout-filters loss,step t.py")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "elsewhere").exists()
    # plan takes the same file: it passes over the keys only launch or export has
    assert call_main(["plan", "--config", "c.toml", "t.py"], tmp_path).check({0})


def test_the_launch_options_come_from_the_file(tmp_path: Path) -> None:
    from distrun.cli.args import parse
    from distrun.cli.launch import options_from, parser

    (tmp_path / "c.toml").write_text(LAUNCH_SETTINGS)
    ns, _ = parse(parser({}), ["--config", str(tmp_path / "c.toml"), "t.py"], {})
    options = options_from(ns)
    assert (options.dry_run, options.force, options.no_instrument) == (True, True, True)
    assert (options.stall_timeout_s, options.stall_action, options.master_wait_s) == \
        (600.0, "warn", 30.0)
    assert (options.run_dir, options.local_ranks_filter) == ("elsewhere", (0, 1))


def test_every_launch_option_is_a_config_key() -> None:
    """The keys are the parser's long options (one source of truth): each option launch
    --help lists is accepted, --config and --help excepted."""
    from distrun.cli.args import every_setting
    from distrun.cli.launch import parser

    keys = every_setting()
    assert keys is not None
    options = {s[2:].replace("-", "_") for a in parser({})._actions
               for s in a.option_strings if s.startswith("--")}
    assert options - keys == {"help", "config"}
    assert {"stall_timeout", "stall_action", "master_wait", "force", "hostfile", "run_dir",
            "dry_run", "no_instrument", "time", "partition", "image"} <= keys


def test_without_torch_plan_takes_a_file_with_torchrun_and_launch_keys(tmp_path: Path) -> None:
    """Without torch, plan's fallback parser knows only the topology flags: the file's other
    keys (torchrun's, launch's) are passed over, not refused; its own are still checked."""
    blocker = tmp_path / "blocker" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named torch (test)')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(blocker.parent), str(REPO / "src")])}
    (tmp_path / "c.toml").write_text("nproc_per_node = 3\nmax_restarts = 2\nstall_timeout = 60\n")
    done = run_cli(["plan", "--config", "c.toml", "--inventory", "1x4xcpu", "--json", "t.py"],
                   tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nproc_per_node"] == 3
    (tmp_path / "c.toml").write_text('nnodes = "two"\n')
    bad = run_cli(["plan", "--config", "c.toml", "t.py"], tmp_path, env=env)
    assert bad.returncode == 2 and bad.stderr.startswith(
        "distrun plan: error: from config c.toml, key nnodes: --nnodes 'two' is not a number")
