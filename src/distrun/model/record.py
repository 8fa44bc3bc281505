"""The run record, typed: events, samples, rank failures, the job's outcome, the plan read back.

``events.jsonl`` holds one JSON object per line, ``{"time": ISO-8601 UTC, "event": name, ...}``
(docs/run-directory.md lists every event and its fields). ``parse_event`` turns one line into
one of the event types below, ``OtherEvent`` for a name this version does not know (a newer
writer), or a ``BadLine`` naming file:line and what is wrong with it: it never raises, so a
corrupted or hostile run directory gives a partial view, never a traceback.

Writing stays in ``distrun.model.rundir`` (standard library only, for the runtime); this module
needs pydantic and is imported only on the host side.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distrun.model import rundir
from distrun.model.plan import LaunchPlan

MAX_RANK = 1 << 20  # no job has a million ranks; a larger number is corruption
MAX_LINE = 1 << 20  # bytes of one events line that are parsed; longer lines are bad lines
Rank = Annotated[int, Field(ge=0, lt=MAX_RANK)]
Count = Annotated[int, Field(ge=0, le=MAX_RANK)]
Pid = Annotated[int, Field(ge=0, lt=1 << 31)]


EXIT_STALLED = 124  # like timeout(1): distrun stopped the job after a stall or a hang


class JobStatus(str, Enum):
    """How a job ended (or that it has not): ``summary.json``'s and ``job_finished``'s status."""

    SUCCEEDED = "succeeded"
    # every rank succeeded (exit status 0) but the launcher could not copy every line the
    # ranks printed into logs/rank-N.log (summary.json: logs_complete false)
    SUCCEEDED_LOGS_INCOMPLETE = "succeeded-logs-incomplete"
    FAILED = "failed"
    STALLED = "stalled"  # distrun stopped it after a stall or a lost node (EXIT_STALLED)
    INTERRUPTED = "interrupted"  # a signal to the launcher (Ctrl-C, scheduler)
    ENDED_ABNORMALLY = "ended-abnormally"  # the launcher died without recording an end
    RUNNING = "running"


def epoch(stamp: object) -> float | None:
    """An events.jsonl time (``2025-01-01T00:00:00.000000Z``) as a Unix time."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError):
        return None


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)


class _Event(_Record):
    time: str = ""

    @property
    def at(self) -> float | None:
        return epoch(self.time)

    def fields(self) -> dict[str, Any]:
        """The event as written (what ``monitor --json`` and the report show)."""
        return self.model_dump(mode="json")


class LaunchStarted(_Event):
    event: Literal["launch_started"]
    pid: Pid | None = None
    host: str | None = None  # where the launcher runs (its pid means something only there)
    node_rank: Count = 0
    world_size: Count | None = None
    nproc_per_node: Count | None = None
    backend: str | None = None


class WorkerPlace(_Record):
    local_rank: Count | None = None
    node_rank: Count | None = None
    host: str | None = None


class WorkersStarted(_Event):
    event: Literal["workers_started"]
    attempt: int = 0
    world_size: Count | None = None
    ranks: dict[Rank, WorkerPlace] = {}
    master_addr: str | None = None
    master_port: int | str | None = None


class RankJoined(_Event):
    event: Literal["rank_joined"]
    rank: Rank
    pid: Pid | None = None
    device: str | None = None
    local_rank: Count | None = None
    node_rank: Count | None = None
    host: str | None = None


class Progress(_Event):
    event: Literal["progress"]
    rank: Rank
    pid: Pid | None = None
    step: int | None = None
    metrics: dict[str, Any] = {}

    def numbers(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.metrics.items()
                if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) < 1e300}


class Verified(_Event):
    event: Literal["verified"]
    check: str = ""
    severity: str = "info"
    message: str = ""


class Stalled(_Event):
    event: Literal["stalled"]
    rank: Rank
    node_rank: Count | None = None
    local_rank: Count | None = None
    pid: Pid | None = None
    last_step: int | None = None
    heartbeat_age_s: float | None = None
    culprit: bool = True
    stack: str | None = None
    stack_method: str | None = None


class StallVerdict(_Event):
    event: Literal["stall_verdict"]
    ranks: list[Rank] = []
    message: str = ""
    action: str | None = None
    lost_nodes: list[Count] | None = None


class NodeLost(_Event):
    event: Literal["node_lost"]
    node_rank: Count
    host: str = "?"
    ranks: list[Rank] = []
    last_heard_s: float | None = None
    last_step: int | None = None
    reason: str = ""
    store: str = ""


class RankExited(_Event):
    event: Literal["rank_exited"]
    rank: Rank
    local_rank: Count | None = None
    pid: Pid | None = None
    exitcode: int = 0
    signal: str | None = None
    failed_at: float | None = None
    error_file: str | None = None
    message: str = ""
    role: str | None = None

    def failure(self) -> RankFailure:
        return RankFailure(self.rank, self.local_rank, self.pid, self.exitcode, self.signal,
                           self.failed_at, self.error_file, self.message,
                           self.role == FIRST_ROLE)


class FitRecord(_Record):
    """peak = intercept + slope x batch, measured on the rank (``source``: by what)."""

    intercept: float
    slope: float
    sizes: list[int] = []
    source: str = ""


class FoundBatch(_Record):
    size: Annotated[int, Field(ge=1)]
    source: str = ""


class RankOom(_Event):
    """An out-of-memory error ended the rank (written by the rank's instrumentation; every
    value it could not read is None)."""

    event: Literal["rank_oom"]
    rank: Rank
    pid: Pid | None = None
    device: str | None = None
    device_name: str | None = None
    peak_bytes: Annotated[int, Field(ge=0)] | None = None
    peak_source: str | None = None
    capacity_bytes: Annotated[int, Field(ge=0)] | None = None
    capacity_source: str | None = None
    free_bytes: Annotated[int, Field(ge=0)] | None = None
    requested_bytes: Annotated[int, Field(ge=0)] | None = None
    batch_size: Annotated[int, Field(ge=1)] | None = None
    batch_source: str | None = None
    global_batch: Annotated[int, Field(ge=1)] | None = None
    world_size: Annotated[int, Field(ge=1, le=MAX_RANK)] | None = None
    found_batch: FoundBatch | None = None
    fit: FitRecord | None = None
    error: str = ""


class OrphansEnded(_Event):
    event: Literal["orphans_ended"]
    subreaper: bool = False
    processes: list[Any] = []


class JobFinished(_Event):
    event: Literal["job_finished"]
    exitcode: int = 0
    status: str = ""
    duration_s: float | None = None
    message: str = ""

    @property
    def job_status(self) -> JobStatus | None:
        try:
            return JobStatus(self.status)
        except ValueError:
            return None


class LauncherLost(_Event):
    """Written by the launcher's guardian when ``distrun launch`` itself was killed."""

    event: Literal["launcher_lost"]
    pid: int | None = None
    ended: int = 0


class MonitorError(_Event):
    event: Literal["monitor_error"]
    error: str = ""


class OtherEvent(_Event):
    """An event this version does not know (written by a newer distrun or a plug-in)."""

    event: str


Event = (LaunchStarted | WorkersStarted | RankJoined | Progress | Verified | Stalled
         | StallVerdict | NodeLost | RankExited | RankOom | OrphansEnded | JobFinished | LauncherLost
         | MonitorError | OtherEvent)
EVENT_TYPES: dict[str, type[_Event]] = {
    "launch_started": LaunchStarted, "workers_started": WorkersStarted,
    "rank_joined": RankJoined, "progress": Progress, "verified": Verified, "stalled": Stalled,
    "stall_verdict": StallVerdict, "node_lost": NodeLost, "rank_exited": RankExited,
    "orphans_ended": OrphansEnded, "job_finished": JobFinished, "monitor_error": MonitorError,
    "launcher_lost": LauncherLost, "rank_oom": RankOom,
}


@dataclass(frozen=True)
class BadLine:
    """A line that is not a valid record: kept as a value, reported as a warning."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return printable(f"{self.file}:{self.line}: {self.reason}")


def printable(text: str) -> str:
    """One line a terminal shows as it is: control characters (``\\r``, escapes) as ``\\xNN``."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _why(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in err["loc"]) or "value"
    return f"{where}: {err['msg']}"


def _object(text: str | bytes, file: str, number: int) -> dict[str, Any] | BadLine:
    if len(text) > MAX_LINE:
        return BadLine(file, number, f"line of {len(text)} bytes is too long")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return BadLine(file, number, f"not JSON ({str(exc).splitlines()[0][:80]})")
    if not isinstance(data, dict):
        return BadLine(file, number, f"not a JSON object but {type(data).__name__}")
    return data


def parse_event(text: str | bytes, file: str = "events.jsonl", number: int = 0) -> Event | BadLine:
    """One events.jsonl line as an event, or a ``BadLine``; never raises."""
    data = _object(text, file, number)
    if isinstance(data, BadLine):
        return data
    name = data.get("event")
    if not isinstance(name, str) or not name:
        return BadLine(file, number, "no \"event\" name")
    kind = EVENT_TYPES.get(name, OtherEvent)
    try:
        return kind.model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        return BadLine(file, number, f"bad {name} event: {_why(exc)}")
    except RecursionError:
        return BadLine(file, number, f"bad {name} event: nested too deeply")


class DeviceRecord(_Record):
    """One device in a ``samples.jsonl`` line (see distrun.monitor.samples.DeviceSample)."""

    index: int
    name: str = ""
    utilization_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    pids: list[int] | None = None
    source: str = ""
    note: str = ""


class ProcRecord(_Record):
    pid: Pid | None = None
    step: int | None = None
    heartbeat_age_s: float | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    alive: bool = True


class SampleLine(_Record):
    """One watcher tick in ``samples.jsonl``: this node's devices and rank processes."""

    time: float
    node_rank: Count | None = None
    source: str = ""
    unavailable: str = ""
    devices: list[DeviceRecord] = []
    ranks: dict[Rank, ProcRecord] = {}


def parse_sample(text: str | bytes, file: str = "samples.jsonl",
                 number: int = 0) -> SampleLine | BadLine:
    data = _object(text, file, number)
    if isinstance(data, BadLine):
        return data
    try:
        return SampleLine.model_validate(data)
    except ValidationError as exc:
        return BadLine(file, number, f"bad sample: {_why(exc)}")
    except RecursionError:
        return BadLine(file, number, "bad sample: nested too deeply")


T = TypeVar("T")


class Tail:
    """New complete lines of a JSON-lines file since the last call, parsed; bad lines kept.
    A file that is not a regular file (a FIFO, a folder, a link) is never read: ``refused``
    says why."""

    def __init__(self, path: Path, parse: Callable[[bytes, str, int], T | BadLine]) -> None:
        self.path, self.offset, self.partial, self.number = path, 0, b"", 0
        self._parse = parse
        self.bad: list[BadLine] = []
        self.refused = ""

    def read(self) -> list[Any]:
        try:
            data = rundir.read_bytes(self.path, self.offset)
        except rundir.RunDirError as exc:
            self.refused = str(exc)
            return []
        except OSError:
            return []
        self.refused = ""
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        out = []
        for line in lines:
            self.number += 1
            if not line.strip():
                continue
            value = self._parse(line, self.path.name, self.number)
            if isinstance(value, BadLine):
                self.bad.append(value)
            else:
                out.append(value)
        return out


def events(path: Path) -> Tail:
    return Tail(path, parse_event)


def samples(path: Path) -> Tail:
    return Tail(path, parse_sample)


def read_events(path: Path) -> tuple[list[Event], list[BadLine]]:
    tail = events(path)
    return tail.read(), tail.bad


FIRST_ROLE = "first failure"
AFTER_ROLE = "stopped or failed after"


@dataclass(frozen=True)
class RankFailure:
    """One rank that did not end well (torchelastic's ProcessFailure, typed and flattened)."""

    rank: int
    local_rank: int | None
    pid: int | None
    exitcode: int
    signal: str | None  # "SIGKILL" when the exit code is negative
    time: float | None  # Unix time torchelastic recorded the failure
    error_file: str | None
    message: str
    first: bool = False

    def event_fields(self) -> dict[str, Any]:
        """The ``rank_exited`` event's fields (and summary.json's failures)."""
        return {"local_rank": self.local_rank, "pid": self.pid, "exitcode": self.exitcode,
                "signal": self.signal, "failed_at": self.time, "error_file": self.error_file,
                "message": self.message, "role": FIRST_ROLE if self.first else AFTER_ROLE}


@dataclass(frozen=True)
class JobOutcome:
    """How the job ended on this node."""

    status: JobStatus
    exitcode: int
    failures: tuple[RankFailure, ...] = ()
    first_failure: int | None = None
    message: str = ""
    logs_complete: bool = True  # False: a rank-log tailer could not drain its stream

    def failures_json(self) -> dict[str, dict[str, Any]]:
        return {str(f.rank): f.event_fields() for f in sorted(self.failures, key=lambda f: f.rank)}


@dataclass(frozen=True)
class PlanRead:
    """plan.json read back: the plan, or None and a one-line reason."""

    plan: LaunchPlan | None
    error: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)


def read_plan(path: Path) -> PlanRead:
    """``plan.json`` as a ``LaunchPlan``; never raises (a missing or corrupted plan is a reason)."""
    try:
        text = rundir.read_bytes(path, limit=MAX_LINE + 1)
    except OSError as exc:  # a RunDirError (a FIFO, a link) names the path and what is there
        why = str(exc) if isinstance(exc, rundir.RunDirError) else \
            f"{path}: cannot read ({exc.strerror or exc})"
        return PlanRead(None, why)
    data = _object(text, str(path), 1)
    if isinstance(data, BadLine):
        return PlanRead(None, f"{path}: {data.reason}")
    try:
        plan = LaunchPlan.model_validate(data)
    except ValidationError as exc:
        return PlanRead(None, f"{path}: {_why(exc)}", data)
    except RecursionError:
        return PlanRead(None, f"{path}: nested too deeply", data)
    problem = _implausible(plan)
    if problem:
        return PlanRead(None, f"{path}: {problem}", data)
    return PlanRead(plan, "", data)


def _implausible(plan: LaunchPlan) -> str:
    if not 0 <= plan.world_size <= MAX_RANK:
        return f"world_size {plan.world_size} is out of range"
    ranks = [r for node in plan.nodes for r in node.ranks]
    if len(ranks) > MAX_RANK or any(not 0 <= r < MAX_RANK for r in ranks):
        return "nodes[].ranks hold ranks out of range"
    if any(not 0 <= i < MAX_RANK for node in plan.nodes for i in node.visible_devices):
        return "nodes[].visible_devices hold device indices out of range"
    return ""
