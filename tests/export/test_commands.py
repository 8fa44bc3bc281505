"""``--torchrun`` is a command: every exporter writes its words one by one."""

from __future__ import annotations

import shlex

import pytest
import yaml

from distrun.errors import UsageError
from distrun.export import ExportOptions, render
from tests.export.cases import cpu_c10d, mi300_single

PY = "python -m torch.distributed.run"


def test_k8s_command_is_the_words() -> None:
    text = render("k8s", cpu_c10d(), ExportOptions(torchrun=PY))
    assert isinstance(text, str)
    pod = yaml.safe_load(text)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["containers"][0]["command"] == ["python", "-m", "torch.distributed.run"]


@pytest.mark.parametrize("torchrun", [PY, "distrun launch", "'/opt/my env/bin/torchrun'"])
def test_slurm_line_starts_with_the_words(torchrun: str) -> None:
    for plan in (cpu_c10d(), mi300_single()):
        text = render("slurm", plan, ExportOptions(torchrun=torchrun))
        assert isinstance(text, str)
        line = text.rstrip().splitlines()[-1].strip().replace('"$head_addr', '"h')
        words = shlex.split(line)
        program = shlex.split(torchrun)
        assert words[:len(program)] == program
        assert words[len(program)] in ("--standalone", "--nnodes")


def test_shell_exec_line_splits_into_the_words() -> None:
    out = render("shell", cpu_c10d(), ExportOptions(torchrun=PY))
    assert isinstance(out, dict)
    line = next(ln for ln in out["node-1.sh"].splitlines() if ln.startswith("exec "))
    assert shlex.split(line)[1:5] == ["python", "-m", "torch.distributed.run", "--nnodes"]


@pytest.mark.parametrize("bad", ["'unclosed", "   "])
def test_a_torchrun_that_is_no_command_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="--torchrun"):
        ExportOptions(torchrun=bad)
