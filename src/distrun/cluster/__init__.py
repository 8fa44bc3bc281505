"""Launch environments: one class each, detected in one documented order."""

from __future__ import annotations

import os
from collections.abc import Mapping

from distrun.cluster.base import ClusterEnvError, ClusterEnvironment, RankFacts
from distrun.cluster.kubeflow import Kubeflow
from distrun.cluster.lsf import LSF
from distrun.cluster.manual import Manual, SingleProcess
from distrun.cluster.mpi import MPI
from distrun.cluster.slurm import Slurm, SlurmAllocation
from distrun.cluster.torchelastic import TorchElastic

# Detection order. The first environment whose detect() is true describes the process.
DETECTION_ORDER: tuple[type[ClusterEnvironment], ...] = (
    # torchrun (and distrun launch) set the most exact per-process facts, and they are set
    # by the process's direct parent: inside Slurm, Kubeflow or MPI, torchrun's view wins.
    TorchElastic,
    # MPI before Slurm: `mpirun` inside an sbatch script leaves the batch task's SLURM_*
    # variables in every rank's environment; OMPI_/PMI_ variables describe the real rank.
    MPI,
    # Slurm srun tasks: SLURM_PROCID etc. are per task and always set by slurmstepd.
    Slurm,
    # LSF jsrun tasks.
    LSF,
    # Kubeflow before manual: it sets the same RANK/WORLD_SIZE names, plus Kubernetes' own.
    Kubeflow,
    # Anything that exported RANK and WORLD_SIZE (accelerate, DeepSpeed's launcher, by hand).
    Manual,
    # Nothing started this process as part of a job.
    SingleProcess,
)


def detect(env: Mapping[str, str] | None = None) -> ClusterEnvironment:
    env = os.environ if env is None else env
    cls = next(c for c in DETECTION_ORDER if c.detect(env))
    return cls(env)


__all__ = [
    "DETECTION_ORDER",
    "LSF",
    "MPI",
    "ClusterEnvError",
    "ClusterEnvironment",
    "Kubeflow",
    "Manual",
    "RankFacts",
    "SingleProcess",
    "Slurm",
    "SlurmAllocation",
    "TorchElastic",
    "detect",
]
