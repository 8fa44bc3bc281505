"""The exported files read by the tools themselves: accelerate's config loader, DeepSpeed's
hostfile parser, PyYAML for the Kubeflow manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from distrun.export import ExportOptions, render
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


def test_deepspeed_reads_the_hostfile(tmp_path: Path) -> None:
    runner = pytest.importorskip("deepspeed.launcher.runner")
    path = _write(tmp_path, "hostfile", render("deepspeed", h100(), ExportOptions()))
    pool = runner.fetch_hostfile(str(path))
    assert dict(pool) == {"node0": 8, "node1": 8}
    assert list(pool) == ["node0", "node1"]


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
