"""What one sampling tick sees. A metric a device or tool cannot give is ``None`` (shown as
``n/a``), never an exception."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceSample:
    """One accelerator. ``index`` is the physical ordinal the vendor tool reports.

    ``pids`` is None when the tool cannot list processes (e.g. in a container without the
    host's PID namespace), an empty tuple when it lists none.
    """

    index: int
    name: str = ""
    utilization_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    pids: tuple[int, ...] | None = None
    source: str = ""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["pids"] = list(self.pids) if self.pids is not None else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DeviceSample:
        pids = data.get("pids")
        return cls(**{**data, "pids": tuple(pids) if pids is not None else None})


@dataclass(frozen=True)
class ProcSample:
    """One rank's process, through psutil."""

    pid: int
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    alive: bool = True
    # its live descendants together (DataLoader workers, a compiler it waits for); sampled
    # only while the process itself is nearly idle, else None
    children_cpu_percent: float | None = None

    @property
    def work_percent(self) -> float | None:
        """CPU the rank uses, its child processes' included where they were sampled."""
        if self.cpu_percent is None:
            return None
        return self.cpu_percent + (self.children_cpu_percent or 0.0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DeviceReading:
    """All devices of one node, or why there are none."""

    devices: tuple[DeviceSample, ...] = ()
    source: str = ""
    unavailable: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
