"""Renderers from a :class:`~distrun.model.plan.LaunchPlan` to other tools' launch artefacts.

Each format is a pure function ``render(plan, options)``: text (or, for ``shell``, a mapping of
file name to text), no I/O. Every argument is shell-quoted; YAML is written by PyYAML.
"""

from __future__ import annotations

from collections.abc import Callable

from distrun.export import accelerate, deepspeed, k8s, shell, slurm
from distrun.export.common import ExportError
from distrun.export.options import ExportOptions
from distrun.model.plan import LaunchPlan

Rendered = str | dict[str, str]

FORMATS: dict[str, Callable[[LaunchPlan, ExportOptions], Rendered]] = {
    "slurm": slurm.render,
    "accelerate": accelerate.render,
    "deepspeed": deepspeed.render,
    "k8s": k8s.render,
    "shell": shell.render,
}


def render(fmt: str, plan: LaunchPlan, options: ExportOptions) -> Rendered:
    return FORMATS[fmt](plan, options)


__all__ = ["FORMATS", "ExportError", "ExportOptions", "Rendered", "render"]
