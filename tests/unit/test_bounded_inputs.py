"""Bad input outside the CLI parser: declared inventories, launcher variables, user files.

Each is refused with one line naming the value (cut to a readable length) and the fix, as a
UsageError (exit status 2 through the CLI), fast and without building anything huge.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.cluster import detect
from distrun.cluster.base import ClusterEnvError
from distrun.cluster.slurm import SlurmAllocation, expand_hostlist
from distrun.errors import UsageError
from distrun.model.userfile import read_user_text

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("text, says", [
    ("99999999x8xH100", "declares 99999999 node(s) of 8 device(s)"),
    ("1x99999xcpu", "declares 1 node(s) of 99999 device(s)"),
    ("100000x1024xH100", "declares 100000 node(s) of 1024 device(s)"),
    ("1x" + "9" * 5000 + "xH100", "is not NODESxDEVICESxMODEL"),
    ("0x8xH100", "zero nodes or devices"),
])
def test_declared_inventory_is_bounded(text: str, says: str) -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match="expected") as exc:
        parse_declared(text)
    assert says in str(exc.value) and len(str(exc.value)) < 400
    assert time.monotonic() - started < 1


def test_a_large_but_sane_declared_cpu_inventory_is_accepted() -> None:
    nodes = parse_declared("4x64xcpu")
    assert len(nodes) == 4 and nodes[0].count == 64


SLURM = {"SLURM_JOB_ID": "77", "SLURM_PROCID": "0", "SLURM_NTASKS": "2",
         "SLURM_JOB_NODELIST": "n[0-1]"}


@pytest.mark.parametrize("update, says", [
    ({"SLURM_JOB_ID": "abc"}, "SLURM_JOB_ID='abc' is not an integer"),
    ({"SLURM_NTASKS": "0"}, "SLURM_NTASKS='0' is out of range"),
    ({"SLURM_PROCID": "-1"}, "SLURM_PROCID='-1' is out of range"),
    ({"SLURM_PROCID": "5"}, "rank 5 is outside a world of 2"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT='70000' is out of range"),
    ({"SLURM_JOB_NODELIST": "n[["}, "SLURM_JOB_NODELIST='n[[' does not parse"),
    ({"SLURM_JOB_NODELIST": "n[0-99999999]"}, "names more than 100000 nodes"),
])
def test_slurm_variables_are_checked(update: dict[str, str], says: str) -> None:
    with pytest.raises(ClusterEnvError) as exc:
        detect({**SLURM, **update}).facts()
    assert says in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("nodelist", ["n[[", "n[0-99999999]", ",".join(["x[0-99999]"] * 50)])
def test_allocation_node_lists_are_bounded(nodelist: str) -> None:
    started = time.monotonic()
    with pytest.raises(ClusterEnvError, match="SLURM_JOB_NODELIST"):
        SlurmAllocation.from_env({**SLURM, "SLURM_JOB_NODELIST": nodelist})
    assert time.monotonic() - started < 1


def test_hostlist_within_the_bound_expands() -> None:
    assert expand_hostlist("n[0-2],m7", "X") == ("n0", "n1", "n2", "m7")


@pytest.mark.parametrize("env, var", [
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE"),
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "٣", "WORLD_SIZE": "4"}, "RANK"),
    ({"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "-5"},
     "MASTER_PORT"),
    ({"OMPI_COMM_WORLD_RANK": "1_0", "OMPI_COMM_WORLD_SIZE": "20"}, "OMPI_COMM_WORLD_RANK"),
    ({"PMI_RANK": "0", "PMI_SIZE": "1e3"}, "PMI_SIZE"),
    ({"KUBERNETES_PORT": "x", "MASTER_ADDR": "m", "MASTER_PORT": "http", "WORLD_SIZE": "2",
      "RANK": "0"}, "MASTER_PORT"),
    ({"LSB_JOBID": "1", "JSM_NAMESPACE_RANK": "0", "JSM_NAMESPACE_SIZE": "[1]"},
     "JSM_NAMESPACE_SIZE"),
    ({"RANK": "0", "WORLD_SIZE": "9" * 5000}, "WORLD_SIZE"),
])
def test_launcher_integers_name_the_variable(env: dict[str, str], var: str) -> None:
    with pytest.raises(ClusterEnvError) as exc:
        detect(env).facts()
    assert f"{var}=" in str(exc.value) and len(str(exc.value)) < 400


def test_user_file_refuses_special_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    binary = tmp_path / "bin"
    binary.write_bytes(b"\x7fELF\xff\xfe")
    big = tmp_path / "big"
    big.write_text("x" * 2000)
    cases = {str(fifo): "is a FIFO", str(tmp_path): "is a directory",
             "/dev/zero": "is a character device", str(binary): "is not UTF-8 text (byte 4",
             str(big): "is 2000 bytes", str(tmp_path / "none"): "cannot read hostfile"}
    started = time.monotonic()
    for path, says in cases.items():
        with pytest.raises(UsageError) as exc:
            read_user_text(path, "hostfile", "pass a text file", limit=1000)
        assert says in str(exc.value) and "fix: pass a text file" in str(exc.value)
    assert time.monotonic() - started < 2  # the FIFO did not block
    ok = tmp_path / "ok"
    ok.write_text("h1 slots=2\n")
    assert read_user_text(ok, "hostfile", "") == "h1 slots=2\n"
