"""``distrun export`` as a user runs it: the real CLI (a subprocess for the issue's checks,
in-process through ``distrun.cli.main.main`` for the rest, to keep the suite fast)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from distrun.cli.main import main
from tests.conftest import run_cli

H100 = ["--inventory", "2x8xH100-80GB"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("DISTRUN_", "PET_", "SLURM_")):
            monkeypatch.delenv(key)


def test_accelerate_for_2x8_h100_says_2_machines_16_processes(tmp_path: Path) -> None:
    done = run_cli(["export", "accelerate", *H100, "train.py"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cfg = yaml.safe_load(done.stdout)
    assert (cfg["num_machines"], cfg["num_processes"]) == (2, 16)
    assert cfg["distributed_type"] == "MULTI_GPU"


def test_slurm_for_2x8_h100_asks_2_nodes_8_gpus_each(tmp_path: Path) -> None:
    out = tmp_path / "job.sbatch"
    done = run_cli(["export", "slurm", *H100, "--time", "01:00:00", "--partition", "gpu",
                    "--account", "proj", "--output", str(out), "train.py", "--lr", "0.1"],
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = out.read_text().splitlines()
    for want in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --time=01:00:00", "#SBATCH --partition=gpu", "#SBATCH --account=proj",
                 "#SBATCH --job-name=train"):
        assert want in lines
    assert lines[-1].endswith("--nproc-per-node 8 train.py --lr 0.1")


@pytest.mark.usefixtures("clean_env")
def test_refuses_a_plan_with_an_error_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "job.sbatch"
    code = main(["export", "slurm", *H100, "--nproc-per-node", "16", "--output", str(out),
                 "train.py"])
    done = capsys.readouterr()
    assert code == 3
    assert done.out == ""
    assert "invalid device ordinal" in done.err
    assert "--nproc-per-node 8" in done.err
    assert "not written: the plan has 1 error(s)" in done.err
    assert not out.exists()


@pytest.mark.usefixtures("clean_env")
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        ("export", "slurmm", "train.py"): "unknown export format 'slurmm'",
        ("export", "slurm", *H100, "--time", "2h", "train.py"): "--time '2h' is not a Slurm",
        ("export", "k8s", *H100, "--job-name", "My_Job", "train.py"): "--job-name 'My_Job'",
        ("export", "deepspeed", *H100, "--submit", "train.py"): "--submit only with 'slurm'",
        ("export", "accelerate", "--inventory", "2x8xT20", "train.py"):
            "accelerate has no multi-process mode for enflame",
        ("export", "slurm", *H100, "--cpus-per-task", "0", "train.py"): "--cpus-per-task 0",
    }
    for argv, text in cases.items():
        code = main(list(argv))
        done = capsys.readouterr()
        assert (code, done.out) == (2, ""), (argv, done.err)
        assert text in done.err
        assert len(done.err.strip().splitlines()) == 1, done.err


@pytest.mark.usefixtures("clean_env")
def test_shell_writes_one_executable_script_per_node(tmp_path: Path) -> None:
    folder = tmp_path / "scripts"
    assert main(["export", "shell", *H100, "--output", str(folder), "train.py"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["node-0.sh", "node-1.sh"]
    for k in (0, 1):
        path = folder / f"node-{k}.sh"
        assert path.stat().st_mode & stat.S_IXUSR
        assert f"--node-rank {k} --master-addr node0" in path.read_text().splitlines()[-1]


@pytest.mark.usefixtures("clean_env")
def test_submit_without_sbatch_says_where_to_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["export", "slurm", *H100, "--submit", "train.py"]) == 1
    err = capsys.readouterr().err
    assert "sbatch is not on PATH" in err
    assert "--output FILE" in err


@pytest.mark.usefixtures("clean_env")
def test_flags_from_distrun_variables(monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DISTRUN_PARTITION", "long")
    monkeypatch.setenv("DISTRUN_CPUS_PER_TASK", "32")
    assert main(["export", "slurm", *H100, "train.py"]) == 0
    out = capsys.readouterr().out
    assert "#SBATCH --partition=long\n" in out
    assert "#SBATCH --cpus-per-task=32\n" in out


@pytest.mark.usefixtures("clean_env")
def test_export_honours_config_like_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The same settings as 'plan': a config's nproc_per_node = 3 is 3 in both."""
    (tmp_path / "job.toml").write_text('nproc_per_node = 3\nmax_restarts = 2\n')
    monkeypatch.chdir(tmp_path)
    flags = ["--config", "job.toml", "--inventory", "1x4xcpu"]
    assert main(["plan", *flags, "--json", "t.py"]) == 0
    assert '"nproc_per_node": 3' in capsys.readouterr().out
    assert main(["export", "shell", *flags, "t.py"]) == 0
    out = capsys.readouterr().out
    assert "exec torchrun --standalone --nproc-per-node 3 --max-restarts 2 t.py\n" in out


@pytest.mark.usefixtures("clean_env")
def test_bad_distrun_variable_in_export_names_it(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DISTRUN_SUBMIT", "perhaps")
    assert main(["export", "slurm", *H100, "train.py"]) == 2
    assert "DISTRUN_SUBMIT='perhaps'" in capsys.readouterr().err


@pytest.mark.usefixtures("clean_env")
def test_output_never_writes_over_a_file_it_did_not_make(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--output naming the user's own file, a link or a device: refused in one line, the file
    kept as it was; a file an earlier export wrote is replaced (re-exporting after a change)."""
    mine = tmp_path / "train.sh"
    mine.write_text("#!/bin/bash\n# my own launcher, hours of work\n")
    target = tmp_path / "target.txt"
    target.write_text("someone else's\n")
    link = tmp_path / "job.sbatch"
    link.symlink_to(target)
    for path, what in ((mine, "a file distrun export did not write"), (link, "a symbolic link"),
                       (Path("/dev/null"), "a character device")):
        code = main(["export", "slurm", *H100, "--output", str(path), "train.py"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"--output '{path}' exists and is {what}: nothing was written over it" in err
        assert "fix: pass --output a new file name, or move that file away first" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert mine.read_text() == "#!/bin/bash\n# my own launcher, hours of work\n"
    assert target.read_text() == "someone else's\n" and link.is_symlink()
    made = tmp_path / "made.sbatch"
    for nodes in ("2x8xH100-80GB", "1x8xH100-80GB"):
        assert main(["export", "slurm", "--inventory", nodes, "--output", str(made), "train.py"]) == 0
    assert "#SBATCH --nodes=1" in made.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.sbatch", "made.sbatch", "target.txt",
                                                          "train.sh"]
