"""The launch plan: a public JSON contract (see docs/plan-json.md).

``{"world_size", "backend", "master_addr", "master_port", "nodes": [{"node_rank", "host",
"nproc", "visible_devices", "ranks"}], "findings": [{"id", "severity", "message", "fix"}],
"commands": [...]}`` plus a few extra fields documented there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, computed_field

from distrun.model.findings import Finding, Severity
from distrun.model.invocation import Flag, Invocation, Nnodes, command_line

__all__ = ["Finding", "LaunchPlan", "NodePlan", "Request", "Severity"]


class NodePlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    node_rank: int
    host: str
    nproc: int
    visible_devices: list[int]
    ranks: list[int]
    env: dict[str, str] = {}
    invocation: Invocation

    @property
    def command(self) -> str:
        """This node's torchrun as one shell line, its visible devices first."""
        return command_line(self.invocation.argv(), self.env.items())


class LaunchPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    world_size: int
    backend: str
    master_addr: str
    master_port: int
    nodes: list[NodePlan]
    findings: list[Finding]
    vendor: str
    device_type: str
    nnodes: int
    nproc_per_node: int
    rdzv_backend: str
    rdzv_endpoint: str
    env: dict[str, str] = {}
    script: str | None = None
    script_args: list[str] = []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def commands(self) -> list[str]:
        """One shell line per node, derived from its invocation (kept in the JSON contract)."""
        return [n.command for n in self.nodes]

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
    nnodes: Nnodes | None = None
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
    rdzv_conf: str | None = None
    local_addr: str | None = None
    passthrough: tuple[Flag, ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.nnodes, (str, int)):  # "2" / "1:4" as typed: parsed here, once
            object.__setattr__(self, "nnodes", Nnodes.parse(self.nnodes))
