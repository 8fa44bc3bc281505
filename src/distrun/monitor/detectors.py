"""The watcher's detectors: decisions over the run state, one per concern.

A detector is any callable ``(tick: Tick) -> Sequence[Finding | Notice | Verdict]``. ``Tick``
is the typed run state at one moment: the ``RunState`` read from the run directory, the plan
object, this tick's device and process samples, the node links, the ranks' progress files on
an instrumented run, ``now``, the verdict so far, whether this is the last look after the job
ended (``final``), and two probes a decision may need (CPU seconds of the rank processes, rank
stacks). A detector does not print, write or stop anything: it returns

* ``Finding`` values (the one findings type, ``distrun.model.findings``): the loop records a
  ``verified`` event and prints ``distrun: verify: <severity>: <message>``;
* a ``Notice``: lines the loop prints, events it records and JSON files it writes into the run
  directory, in that order (a hang named, a hang resolved); it judges nothing;
* a ``Verdict``: the loop records its events, then ``stall_verdict``, prints
  ``distrun: <headline>: <message>`` (or exactly the verdict's ``announce`` lines, with no
  ``stall_verdict``), and stops the job when the verdict says so. The loop acts on the first
  verdict, and on a later one only if it stops the job and the first did not. After a verdict,
  detectors that judge heartbeats (stall, lost node) see ``tick.verdict`` set and stay quiet.

A detector that must remember something between ticks (a verification done once, a hang
already named) is a small object with ``__call__``. Only a detector whose ``sees_final``
attribute is true (the hang detectors) is also called for the ``final`` tick.
``default_detectors()`` is the registry the launcher uses; an instrumented run adds
``distrun.monitor.hangdetect.hang_detectors`` (the join proof and the hang verdict) as
``extra_detectors``, without touching the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distrun.model.findings import Finding
from distrun.model.plan import LaunchPlan
from distrun.model.progress import RankProgress
from distrun.monitor import stall, verify
from distrun.monitor.nodewatch import NodeWatch
from distrun.monitor.samples import DeviceReading, ProcSample
from distrun.monitor.state import RankState, RunState


@dataclass(frozen=True)
class WatchConfig:
    stall_timeout_s: float = 30.0
    stall_action: str = "stop"
    interval_s: float = 1.0
    record_every_s: float = 2.0
    settle_s: float = 3.0  # after every rank's first step, before judging device activity
    stall_stops: bool = True  # False: a heartbeat stall only warns (no --stall-timeout given)
    instrumented: bool = False  # join and CPU activity come from distrun.monitor.hangdetect

    @property
    def join_timeout_s(self) -> float:
        return max(60.0, 2 * self.stall_timeout_s)

    @property
    def stopping(self) -> bool:
        """A lost node: waiting cannot succeed, so stop unless told to only warn."""
        return self.stall_action == "stop"

    @property
    def stall_stopping(self) -> bool:
        """A heartbeat stall stops the job only when the user set --stall-timeout."""
        return self.stall_action == "stop" and self.stall_stops


@dataclass(frozen=True)
class Verdict:
    """The job is stuck: who holds it up, the paragraph that says so, and what was done."""

    ranks: list[int]
    message: str
    stopped: bool
    headline: str = "STALLED"
    events: tuple[tuple[str, dict[str, Any]], ...] = ()  # recorded before stall_verdict
    fields: dict[str, Any] = field(default_factory=dict)  # extra stall_verdict fields
    announce: tuple[str, ...] | None = None  # said instead of the headline; no stall_verdict


@dataclass(frozen=True)
class Notice:
    """What to tell and keep without judging: lines said, events recorded, JSON files written
    into the run directory (``(name, data)``), in that order. ``opens``: a condition now in
    progress, in one line (a hang named); ``closes``: the one said before is over. The loop
    keeps the open one: a job the user interrupts ends with it (``Watcher.ongoing``)."""

    lines: tuple[str, ...] = ()
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    files: tuple[tuple[str, Any], ...] = ()
    opens: str = ""
    closes: bool = False


@dataclass
class Tick:
    """The run as the watcher sees it at ``now``."""

    now: float
    state: RunState
    plan: LaunchPlan | None
    config: WatchConfig
    reading: DeviceReading
    procs: Mapping[int, ProcSample]
    nodes: NodeWatch
    verdict: Verdict | None
    cpu_seconds: Callable[[], dict[int, float]]
    stacks: Callable[[Sequence[RankState]], Mapping[int, stall.Stack]]
    progress: Mapping[int, RankProgress] = field(default_factory=dict)  # instrumented runs
    final: bool = False  # the last look, after the job ended (see FINAL_ATTR)


Result = Finding | Notice | Verdict
Detector = Callable[[Tick], Sequence[Result]]
FINAL_ATTR = "sees_final"  # a detector with this attribute true also gets the final tick


class JoinDetector:
    """Every expected rank joined (once, or after the join timeout); two ranks on one device."""

    def __init__(self) -> None:
        self.done = False
        self.late_said = False

    def __call__(self, t: Tick) -> list[Result]:
        st = t.state
        if self.done:
            return []
        if st.workers_at is None:
            return self._workers_late(t)
        expected = st.expected()
        ready = all(verify._is_joined(st.ranks[r]) for r in expected if r in st.ranks)
        if not ready and t.now - st.workers_at < t.config.join_timeout_s:
            return []
        self.done = True
        if t.config.instrumented:  # joined: from the process group (the proof detector's line)
            return list(verify.bindings(st.ranks))
        world = t.plan.world_size if t.plan else len(expected)
        check = verify.joined(expected, st.ranks, st.node_rank, world)
        if check.severity != "ok":
            check = verify.finding(check.id, check.severity, check.message + (
                f" within {t.config.join_timeout_s:g} s of start (does the script call "
                "distrun.init()? a rank that never calls it holds the others in init)"))
        return [check, *verify.bindings(st.ranks)]

    def _workers_late(self, t: Tick) -> list[Result]:
        st = t.state
        waited = t.now - (st.launched_at or t.now)
        nnodes = t.plan.nnodes if t.plan else 1
        if waited <= t.config.join_timeout_s or self.late_said or nnodes <= 1:
            return []
        self.late_said = True
        return [verify.finding(
            "rendezvous", "warning",
            f"no workers after {waited:.0f} s: not every one of the {nnodes} nodes has joined "
            "the rendezvous (torch waits 900 s by default before giving up); start distrun "
            "launch on every node")]


class ActivityDetector:
    """After the first steps: every device (or, on CPU, every rank process) is busy."""

    def __init__(self, join: JoinDetector) -> None:
        self.join = join
        self.done = False
        self.baseline: dict[int, float] = {}
        self.baseline_at = 0.0

    def __call__(self, t: Tick) -> list[Result]:
        st = t.state
        if self.done or not self.join.done:
            return []
        all_beat = all(s.first_beat is not None for s in st.ranks.values())
        waited = (st.workers_at is not None
                  and t.now - st.workers_at > t.config.join_timeout_s + 10)
        if not (all_beat or waited):
            return []
        if not self.baseline_at:
            self.baseline, self.baseline_at = t.cpu_seconds(), t.now
            return []
        if t.now - self.baseline_at < t.config.settle_s:
            return []
        self.done = True
        return list(self._activity(t))

    def _activity(self, t: Tick) -> list[Finding]:
        st = t.state
        device_type = t.plan.device_type if t.plan else "cpu"
        if device_type in verify.SHARED_DEVICES and t.config.instrumented:
            return []  # CPU use is judged by the proof detector
        if device_type in verify.SHARED_DEVICES:
            used = t.cpu_seconds()
            span = max(t.now - self.baseline_at, 1e-3)
            procs = {pid: ProcSample(pid, 100.0 * (used.get(pid, 0.0) - base) / span)
                     for pid, base in self.baseline.items() if pid in used}
            gone = {pid: ProcSample(pid, 0.0, alive=False)
                    for pid in self.baseline if pid not in used}
            return verify.cpu_activity(st.ranks, {**procs, **gone})
        return verify.device_activity(device_type, st.visible_devices(), st.ranks, t.reading,
                                      st.node_rank)


def lost_node(t: Tick) -> list[Result]:
    """A node of a multi-node job that stopped beating (see distrun.monitor.nodes)."""
    if t.verdict is not None or t.state.finished:
        return []
    gone = t.nodes.lost(t.now)
    if not gone:
        return []
    stopping = t.config.stopping
    events = tuple(("node_lost", {"node_rank": n.node, "host": n.host, "ranks": list(n.ranks),
                                  "last_heard_s": round(n.last_heard_s, 3), "last_step": n.step,
                                  "reason": n.reason, "store": t.nodes.store}) for n in gone)
    return [Verdict([r for n in gone for r in n.ranks], t.nodes.message(gone, stopping),
                    stopping, "NODE LOST", events, {"lost_nodes": [n.node for n in gone]})]


def stalled(t: Tick) -> list[Result]:
    """Ranks whose heartbeat is older than the stall timeout, the culprit named from stacks."""
    st = t.state
    if t.verdict is not None or st.finished:
        return []
    stuck = stall.stalled(st.ranks, t.now, t.config.stall_timeout_s)
    if not stuck or t.nodes.holds_stall(t.now):
        return []
    stacks = t.stacks(stuck)
    stopping = t.config.stall_stopping
    blamed, message = stall.verdict(stuck, stacks, t.now, t.config.stall_timeout_s, stopping)
    events = []
    for s in stuck:
        stack = stacks.get(s.rank)
        events.append(("stalled", {
            "rank": s.rank, "node_rank": s.node_rank, "local_rank": s.local_rank, "pid": s.pid,
            "last_step": s.step, "heartbeat_age_s": s.age_s(t.now), "culprit": s in blamed,
            "stack": stack.text[-4000:] if stack else None,
            "stack_method": stack.method if stack else None}))
    return [Verdict([s.rank for s in blamed], message, stopping, "STALLED", tuple(events))]


def default_detectors() -> list[Detector]:
    """The registry, in the order they run: verification first, then the judges."""
    join = JoinDetector()
    return [join, ActivityDetector(join), lost_node, stalled]
