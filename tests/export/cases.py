"""Plans the export tests render: declared hardware, so they are the same on every machine."""

from __future__ import annotations

from dataclasses import replace

from distrun.accelerators.inventory import parse_declared
from distrun.export import ExportOptions
from distrun.model.plan import LaunchPlan, Request
from distrun.plan.planner import build


def h100() -> LaunchPlan:
    """The issue's example: 2 nodes of 8 H100, static rendezvous, a script argument to quote."""
    req = Request(script="train.py", script_args=("--lr", "3e-4", "--name", "run one"))
    return build(req, parse_declared("2x8xH100-80GB"))


def cpu_c10d() -> LaunchPlan:
    """CPU nodes with 8 cores, a c10d endpoint, a module, a flag passed through to torchrun."""
    nodes = tuple(replace(n, cpus=8) for n in parse_declared("2x2xcpu"))
    req = Request(script="pkg.train", script_args=("--data", "/data/it's here"), nnodes="2",
                  nproc_per_node="2", rdzv_endpoint="10.0.0.1:29400", rdzv_id="job7",
                  module=True, passthrough=(("--max-restarts", "3"),))
    return build(req, nodes)


def mi300_single() -> LaunchPlan:
    """One AMD node, torchrun's standalone rendezvous."""
    return build(Request(script="train.py"), parse_declared("1x8xMI300X"))


CASES = {
    "2x8xH100": (h100, ExportOptions(job_name="train", time="02:00:00", partition="gpu",
                                     account="proj-42", image="nvcr.io/nvidia/pytorch:25.01-py3",
                                     hosts=("gpu-a01", "gpu-a02"))),
    "2x2xcpu-c10d": (cpu_c10d, ExportOptions(job_name="cpu-job", namespace="research",
                                             sbatch_output="logs/%x-%j.out",
                                             sbatch_error="logs/%x-%j.err", machine_rank=1,
                                             hosts=("10.0.0.1", "10.0.0.2"))),
    "1x8xMI300X": (mi300_single, ExportOptions(job_name="mi300")),
}
EXTENSIONS = {"slurm": "sbatch", "accelerate": "yaml", "deepspeed": "hostfile", "k8s": "yaml"}
