"""The exported files read by the tools themselves: accelerate's config loader, DeepSpeed's
hostfile parser, PyYAML for the Kubeflow manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distrun.export import ExportOptions, render
from tests.conftest import run_cli
from tests.export.cases import cpu_c10d, h100


def _write(tmp_path: Path, name: str, text: object) -> Path:
    assert isinstance(text, str)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_accelerate_loads_the_2x8_h100_config(tmp_path: Path) -> None:
    config_args = pytest.importorskip("accelerate.commands.config.config_args")
    from accelerate.utils import DistributedType

    path = _write(tmp_path, "h100.yaml", render("accelerate", h100(), ExportOptions()))
    cfg = config_args.load_config_from_file(str(path))  # what 'accelerate launch' calls
    assert isinstance(cfg, config_args.ClusterConfig)
    assert (cfg.num_machines, cfg.num_processes, cfg.machine_rank) == (2, 16, 0)
    assert cfg.distributed_type == DistributedType.MULTI_GPU
    assert (cfg.main_process_ip, cfg.main_process_port) == ("node0", 29500)
    assert cfg.rdzv_backend == "static"
    assert cfg.gpu_ids == "all"
    assert cfg.use_cpu is False


def test_accelerate_loads_a_cpu_c10d_config_for_machine_1(tmp_path: Path) -> None:
    config_args = pytest.importorskip("accelerate.commands.config.config_args")
    from accelerate.utils import DistributedType

    text = render("accelerate", cpu_c10d(), ExportOptions(machine_rank=1))
    cfg = config_args.ClusterConfig.from_yaml_file(str(_write(tmp_path, "cpu.yaml", text)))
    assert (cfg.num_machines, cfg.num_processes, cfg.machine_rank) == (2, 4, 1)
    assert cfg.distributed_type == DistributedType.MULTI_CPU
    assert cfg.use_cpu is True
    assert (cfg.main_process_ip, cfg.main_process_port, cfg.rdzv_backend) == (
        "10.0.0.1", 29400, "c10d")
    # several CPU processes: only accelerate's mpirun path starts them all
    assert cfg.mpirun_config == {"mpirun_hostfile": "hostfile"}


def test_deepspeed_reads_the_hostfile(tmp_path: Path) -> None:
    runner = pytest.importorskip("deepspeed.launcher.runner")
    options = ExportOptions(hosts=("gpu-a01", "gpu-a02"))
    path = _write(tmp_path, "hostfile", render("deepspeed", h100(), options))
    pool = runner.fetch_hostfile(str(path))
    assert list(pool.items()) == [("gpu-a01", 8), ("gpu-a02", 8)]


HOSTS_FILE = "# the cluster\ncn-a slots=2\ncn-b slots=2\n"


@pytest.mark.parametrize(("flags", "env", "hosts"), [
    (["--host", "cn-a,cn-b"], {}, ["cn-a", "cn-b"]),
    (["--hostfile", "hosts.txt"], {}, ["cn-a", "cn-b"]),
    ([], {"SLURM_JOB_NODELIST": "cn[07-08]"}, ["cn07", "cn08"]),
])
def test_cli_hostfile_names_the_real_hosts(tmp_path: Path, flags: list[str],
                                           env: dict[str, str], hosts: list[str]) -> None:
    """What 'deepspeed --hostfile' would read: the hosts given, never node0/node1."""
    runner = pytest.importorskip("deepspeed.launcher.runner")
    (tmp_path / "hosts.txt").write_text(HOSTS_FILE)
    args = ["export", "deepspeed", "--inventory", "2x2xcpu", "--nproc-per-node", "2", *flags,
            "--output", "out.hostfile", "train.py"]
    done = run_cli(args, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    pool = runner.fetch_hostfile(str(tmp_path / "out.hostfile"))
    assert list(pool.items()) == [(h, 2) for h in hosts]


@pytest.mark.parametrize(("flags", "message"), [
    ([], "no host name for node 0 ('node0' stands in for it)"),
    (["--master-addr", "10.1.2.3"], "no host name for node 1 ('node1' stands in for it)"),
    (["--host", "cn-a"], "1 host name(s) given (cn-a) for a plan of 2 nodes"),
    (["--host", "cn-a,-oProxyCommand=x"], "is not a host name"),
])
def test_cli_refuses_a_hostfile_without_real_hosts(tmp_path: Path, flags: list[str],
                                                   message: str) -> None:
    done = run_cli(["export", "deepspeed", "--inventory", "2x2xcpu", *flags, "train.py"],
                   cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_k8s_manifest_has_one_pod_per_node() -> None:
    text = render("k8s", h100(), ExportOptions(job_name="train"))
    assert isinstance(text, str)
    doc = yaml.safe_load(text)
    specs = doc["spec"]["pytorchReplicaSpecs"]
    assert (doc["apiVersion"], doc["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert specs["Master"]["replicas"] + specs["Worker"]["replicas"] == 2
    pod = specs["Worker"]["template"]["spec"]["containers"][0]
    assert pod["name"] == "pytorch"
    assert pod["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert pod["args"][-4:] == ["--lr", "3e-4", "--name", "run one"]
    assert all(isinstance(a, str) for a in pod["args"])
