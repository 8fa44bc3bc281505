"""What an export needs beyond the plan: scheduler fields the plan cannot know."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from distrun.errors import UsageError

# Slurm's --time forms: MIN, MIN:SEC, H:M:S, D-H, D-H:M, D-H:M:S (see sbatch(1)).
_SLURM_TIME = re.compile(r"^(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})$")
# Kubernetes object names: RFC 1123 labels (lower-case alphanumerics and '-').
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ExportOptions:
    """Fields a format may use; each renderer reads only its own."""

    job_name: str = "distrun"
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    sbatch_output: str = "%x-%j.out"
    sbatch_error: str = "%x-%j.err"
    cpus_per_task: int | None = None
    machine_rank: int = 0
    image: str = "pytorch/pytorch:latest"
    namespace: str | None = None
    torchrun: str = "torchrun"
    """A command, split like a shell would: ``torchrun``, ``python -m torch.distributed.run``
    or ``distrun launch`` (see :meth:`torchrun_argv`)."""
    mpirun_hostfile: str = "hostfile"
    """accelerate, several CPU processes: the mpirun hostfile its config names."""
    hosts: tuple[str, ...] = ()
    """The nodes' host names in node-rank order (``--host``, ``--hostfile``, Slurm's node list);
    empty: the plan's own."""

    def __post_init__(self) -> None:
        for name in ("job_name", "time", "partition", "account", "sbatch_output",
                     "sbatch_error", "image", "namespace", "torchrun", "mpirun_hostfile"):
            value = getattr(self, name)
            if value is not None and (not value or any(c in value for c in "\n\r\t\0")):
                flag = "--" + name.replace("_", "-")
                raise UsageError(f"{flag} {value!r} is empty or has a control character",
                                 "one line of text", f"pass a plain value to {flag}")
        if self.time is not None and not _SLURM_TIME.match(self.time):
            raise UsageError(f"--time {self.time!r} is not a Slurm time limit",
                             "MINUTES, HH:MM:SS or D-HH:MM:SS", "pass e.g. --time 02:00:00")
        if self.cpus_per_task is not None and self.cpus_per_task < 1:
            raise UsageError(f"--cpus-per-task {self.cpus_per_task} is below 1", "at least 1",
                             "pass e.g. --cpus-per-task 8")
        self.torchrun_argv()
        if self.machine_rank < 0:
            raise UsageError(f"--node-rank {self.machine_rank} is negative", "0 or more",
                             "pass e.g. --node-rank 0")

    def torchrun_argv(self) -> list[str]:
        """``--torchrun`` as argv: ``"python -m torch.distributed.run"`` is three words."""
        try:
            words = shlex.split(self.torchrun)
        except ValueError as exc:
            raise UsageError(f"--torchrun {self.torchrun!r} does not split into words ({exc})",
                             "a command line", "pass e.g. --torchrun 'python -m "
                             "torch.distributed.run'") from None
        if not words:
            raise UsageError(f"--torchrun {self.torchrun!r} names no command", "a command line",
                             "pass e.g. --torchrun torchrun")
        return words


def check_k8s_name(value: str, flag: str) -> str:
    if not _K8S_NAME.match(value):
        raise UsageError(f"{flag} {value!r} is not a Kubernetes object name",
                         "lower-case letters, digits and '-' (at most 63), alphanumeric ends",
                         f"pass e.g. {flag} {default_job_name(value)}")
    return value


def default_job_name(text: str | None) -> str:
    """A name valid for Slurm and Kubernetes from a script path: ``train_gpt.py`` -> train-gpt."""
    stem = (text or "distrun").rsplit("/", 1)[-1].removesuffix(".py")
    name = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:63].strip("-")
    return name or "distrun"
