"""The launch plan: a public JSON contract (see docs/plan-json.md).

``{"world_size", "backend", "master_addr", "master_port", "nodes": [{"node_rank", "host",
"nproc", "visible_devices", "ranks"}], "findings": [{"id", "severity", "message", "fix"}],
"commands": [...]}`` plus a few extra fields documented there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    """One preflight result. ``status`` is ``unknown`` when the check could not run."""

    model_config = ConfigDict(frozen=True)

    id: str
    severity: Severity
    message: str
    fix: str = ""
    status: Literal["failed", "unknown"] = "failed"


class NodePlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    node_rank: int
    host: str
    nproc: int
    visible_devices: list[int]
    ranks: list[int]
    env: dict[str, str] = {}


class LaunchPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    world_size: int
    backend: str
    master_addr: str
    master_port: int
    nodes: list[NodePlan]
    findings: list[Finding]
    commands: list[str]
    vendor: str
    device_type: str
    nnodes: int
    nproc_per_node: int
    rdzv_backend: str
    rdzv_endpoint: str
    env: dict[str, str] = {}
    script: str | None = None
    script_args: list[str] = []

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def with_findings(self, extra: list[Finding]) -> LaunchPlan:
        return self.model_copy(update={"findings": [*self.findings, *extra]})


@dataclass(frozen=True)
class Request:
    """What the user asked for: torchrun's topology flags plus distrun's own."""

    script: str | None = None
    script_args: tuple[str, ...] = ()
    nnodes: str | None = None
    nproc_per_node: str | None = None
    node_rank: int | None = None
    master_addr: str | None = None
    master_port: int | None = None
    rdzv_backend: str | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    standalone: bool = False
    backend: str | None = None
    global_batch_size: int | None = None
    per_device_batch_size: int | None = None
    preset: str | None = None
    train_config: str | None = None
    module: bool = False
    no_python: bool = False
    passthrough: tuple[str, ...] = field(default=())
