"""Slurm allocation -> topology, hostfile fan-out: pure functions over env dicts and text."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distrun.errors import UsageError
from distrun.launch.fanout import TOKEN_READY, _relay, job_token, node_commands, parse_hostfile, strip_own
from distrun.model.plan import Request
from distrun.plan.allocation import from_slurm
from tests.conftest import run_cli

# What srun --ntasks-per-node=1 gives node 1's task of a 2-node batch job (job 4, nodes n[0-1]).
STEP = {"SLURM_JOB_ID": "4", "SLURM_JOB_NODELIST": "n[0-1]", "SLURM_NODEID": "1",
        "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "n[0-1]", "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}


def test_slurm_allocation_fills_nodes_rank_and_master() -> None:
    req, note = from_slurm(Request(script="t.py"), STEP)
    assert (str(req.nnodes), req.node_rank, req.master_addr, req.master_port) == ("2", 1, "n0",
                                                                                 10004)
    assert note is not None and "node 1 of 2" in note and "n0:10004" in note
    assert "warning" not in note


def test_user_flags_win_over_the_allocation() -> None:
    req = Request(script="t.py", nnodes="2", node_rank=0, master_addr="10.0.0.1")
    assert from_slurm(req, STEP) == (req, None)


def test_user_port_is_kept() -> None:
    req, _ = from_slurm(Request(script="t.py", master_port=29555), STEP)
    assert req.master_port == 29555 and req.master_addr == "n0"


def test_master_addr_in_the_job_script_wins_and_unresolved_names_are_translated() -> None:
    req, note = from_slurm(Request(script="t.py"), {**STEP, "MASTER_ADDR": "10.0.0.7"})
    assert req.master_addr == "10.0.0.7" and note is not None and "master 10.0.0.7:10004" in note
    asked: list[str] = []
    req, _ = from_slurm(Request(script="t.py"), STEP, lambda n: asked.append(n) or "10.0.0.9")
    assert req.master_addr == "10.0.0.9" and asked == ["n0"]


def test_several_tasks_per_node_is_refused() -> None:
    env = {**STEP, "SLURM_STEP_NUM_TASKS": "4"}
    with pytest.raises(UsageError, match="4 tasks on 2 nodes") as exc:
        from_slurm(Request(script="t.py"), env)
    assert "--ntasks-per-node=1" in str(exc.value)


def test_batch_script_outside_a_step_warns() -> None:
    env = {k: v for k, v in STEP.items() if not k.startswith("SLURM_STEP")}
    req, note = from_slurm(Request(script="t.py"), {**env, "SLURM_NODEID": "0"})
    assert req.node_rank == 0 and note is not None and "srun --ntasks-per-node=1" in note


def test_step_node_list_narrows_the_allocation() -> None:
    env = {**STEP, "SLURM_JOB_NODELIST": "n[0-3]", "SLURM_NODEID": "0"}
    req, _ = from_slurm(Request(script="t.py"), env)
    assert str(req.nnodes) == "2"


def test_single_node_allocation_and_no_slurm_change_nothing() -> None:
    one = {**STEP, "SLURM_JOB_NODELIST": "n0", "SLURM_STEP_NODELIST": "n0",
           "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_NUM_TASKS": "1"}
    req = Request(script="t.py")
    assert from_slurm(req, one) == (req, None)
    assert from_slurm(req, {}) == (req, None)


def test_hostfile_parsing() -> None:
    hosts = parse_hostfile("# cluster\nworker-1 slots=4\n\nworker-2 slots=4  # gpu box\n", "h")
    assert [(h.name, h.slots) for h in hosts] == [("worker-1", 4), ("worker-2", 4)]
    with pytest.raises(UsageError, match=r"h:2: 'b slots=x' is not 'host slots=N'"):
        parse_hostfile("a slots=2\nb slots=x\n", "h")
    with pytest.raises(UsageError, match="names no host"):
        parse_hostfile("# nothing\n", "h")


def test_strip_own_flags() -> None:
    assert strip_own(["--hostfile", "h", "--dry-run", "--max-restarts", "1", "--hostfile=x"]) \
        == ["--max-restarts", "1"]


def test_node_commands_are_quoted_per_host() -> None:
    hosts = parse_hostfile("a slots=2\nb slots=2\n", "h")
    argv = ["--hostfile", "h", "--max-restarts", "1", "train.py", "--name", "my run"]
    cmds = node_commands(argv, 4, Request(script="train.py"), hosts, "/data/my proj",
                         python="/venv/bin/python")
    assert [c[-2] for c in cmds] == ["a", "b"]
    remote = cmds[1][-1]
    assert remote.startswith("cd '/data/my proj' && /venv/bin/python -m distrun.cli.main launch ")
    words = shlex.split(remote.split(" && ", 1)[1])
    assert words[4:] == ["--nnodes", "2", "--node-rank", "1", "--master-addr", "a",
                         "--master-port", "29500", "--nproc-per-node", "2", "--max-restarts",
                         "1", "train.py", "--name", "my run"]


def test_hostfile_conflicts_with_topology_flags() -> None:
    hosts = parse_hostfile("a\nb\n", "h")
    with pytest.raises(UsageError, match="--nnodes"):
        node_commands(["train.py"], 0, Request(script="train.py", nnodes="2"), hosts, "/")


def test_cli_dry_run_prints_one_ssh_command_per_node(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "hosts.txt").write_text("node-a slots=2\nnode-b slots=2\n", encoding="utf-8")
    done = run_cli(["launch", "--hostfile", "hosts.txt", "--dry-run", "--master-port", "29601",
                    "train.py", "--epochs", "2"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2
    for k, line in enumerate(lines):
        argv = shlex.split(line)
        assert argv[:2] == ["ssh", "-tt"] and argv[-2] == ["node-a", "node-b"][k]
        assert argv[-3] == "--"  # ssh's options end before the host
        remote = shlex.split(argv[-1].split(" && ", 1)[1])
        assert remote[-3:] == ["train.py", "--epochs", "2"]
        joined = " ".join(remote)
        assert f"--nnodes 2 --node-rank {k} --master-addr node-a --nproc-per-node 2" in joined
        assert "--master-port 29601" in joined and "--hostfile" not in joined
    assert not (tmp_path / "runs").exists()


def test_cli_hostfile_with_nnodes_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "hosts.txt").write_text("a\nb\n", encoding="utf-8")
    done = run_cli(["launch", "--hostfile", "hosts.txt", "--nnodes", "2", "--dry-run",
                    "train.py"], cwd=tmp_path)
    assert done.returncode == 2
    assert "--hostfile sets the topology, but --nnodes was given" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("host", ["-oProxyCommand=touch /tmp/pwned", "-F/etc/passwd",
                                  "host;reboot", "$(id)", "`id`", "a\\b", "x" * 300])
def test_hostile_host_names_are_refused_as_usage_errors(host: str) -> None:
    with pytest.raises(UsageError, match="is not a host name or address"):
        parse_hostfile(f"{host} slots=1\n", "hosts.txt")


@pytest.mark.parametrize("host", ["node-a", "gpu12.cluster.local", "alice@n1", "10.0.0.7",
                                  "[fe80::1]", "fe80::1"])
def test_ordinary_host_names_and_addresses_are_accepted(host: str) -> None:
    assert parse_hostfile(f"{host} slots=2\n", "h")[0].name == host


@given(st.text(min_size=1, max_size=40).map(lambda s: "-" + s.split()[0] if s.split() else "-x"))
def test_nothing_starting_with_a_dash_ever_reaches_ssh(host: str) -> None:
    with pytest.raises(UsageError):
        parse_hostfile(f"{host} slots=1\n", "h")


def test_cli_dry_run_with_a_job_token_reads_it_remotely_and_never_shows_it(tmp_path: Path
                                                                          ) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "hosts.txt").write_text("node-a slots=2\nnode-b slots=2\n", encoding="utf-8")
    token = "s3cr3t-" + "f" * 24
    done = run_cli(["launch", "--hostfile", "hosts.txt", "--dry-run", "train.py"], cwd=tmp_path,
                   env={"DISTRUN_JOB_TOKEN": token})
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout + done.stderr
    for line in done.stdout.strip().splitlines():
        remote = shlex.split(line)[-1]
        # echo off before the token comes, on stdin, into the variable distrun launch reads
        assert remote.startswith("stty -echo && echo 'distrun: echo off, ready for the job "
                                 "token' && IFS= read -r DISTRUN_JOB_TOKEN && export "
                                 "DISTRUN_JOB_TOKEN && cd ")
    plain = run_cli(["launch", "--hostfile", "hosts.txt", "--dry-run", "train.py"], cwd=tmp_path)
    assert "DISTRUN_JOB_TOKEN" not in plain.stdout and "stty" not in plain.stdout


@pytest.mark.parametrize("token", ["two\nlines", "tab\there", "é" * 20, "x" * 1025])
def test_a_token_one_terminal_line_cannot_carry_is_refused_unshown(token: str) -> None:
    with pytest.raises(UsageError) as exc:
        job_token({"DISTRUN_JOB_TOKEN": token})
    assert "DISTRUN_JOB_TOKEN is longer than 1024 characters or holds a character" \
        in str(exc.value)
    assert token not in str(exc.value)
    assert job_token({"DISTRUN_JOB_TOKEN": "a b~" + "x" * 1020}) is not None
    assert job_token({"DISTRUN_JOB_TOKEN": ""}) is None and job_token({}) is None


def test_a_refused_token_is_a_usage_error_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    (tmp_path / "hosts.txt").write_text("node-a\n", encoding="utf-8")
    done = run_cli(["launch", "--hostfile", "hosts.txt", "--dry-run", "train.py"], cwd=tmp_path,
                   env={"DISTRUN_JOB_TOKEN": "secret\x1bline"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "DISTRUN_JOB_TOKEN is longer than 1024 characters" in done.stderr
    assert "secret" not in done.stderr and done.stdout == ""


def test_the_relay_answers_the_ready_line_once_and_hides_it() -> None:
    shown, answered = io.StringIO(), []
    lines = ["motd\r\n", f"{TOKEN_READY}\r\n", "distrun: waiting\r\n", f"{TOKEN_READY}\r\n"]
    _relay(io.StringIO("".join(lines)), "[a] ", shown, lambda: answered.append(1))
    assert answered == [1]
    assert shown.getvalue() == f"[a] motd\n[a] distrun: waiting\n[a] {TOKEN_READY}\n"
