"""Run a checked plan through torch's elastic launcher; the only step with effects."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, MutableMapping
from typing import Any

from distrun import instrument
from distrun.launch import guardian, reaper
from distrun.model.plan import LaunchPlan
from distrun.model.record import JobOutcome, JobStatus, RankFailure
from distrun.model.rundir import RunDir
from distrun.monitor.hangwatch import HangConfig, HangWatch
from distrun.monitor.stall import EXIT_STALLED
from distrun.monitor.watcher import LauncherActions, WatchConfig, watch

ELASTIC_LOGGER = "torch.distributed.elastic"


def apply_env(plan: LaunchPlan, node_rank: int, env: MutableMapping[str, str]) -> None:
    """Job defaults (the user's own variables win) and this node's visible devices."""
    for key, value in plan.env.items():
        env.setdefault(key, value)
    env.update(plan.nodes[node_rank].env)
    if any(f.id == "libuv-missing" for f in plan.findings):
        env["USE_LIBUV"] = "0"


def torchrun_args(plan: LaunchPlan, ns: argparse.Namespace, node_rank: int) -> argparse.Namespace:
    """torchrun's own argument namespace, with what the plan decided filled in."""
    out = argparse.Namespace(**vars(ns))
    out.nnodes = ns.nnodes if ns.nnodes and ":" in ns.nnodes else str(plan.nnodes)
    out.nproc_per_node = str(plan.nproc_per_node)
    out.rdzv_backend = plan.rdzv_backend
    out.node_rank = node_rank
    out.standalone = False
    if plan.rdzv_backend == "static":
        out.master_addr, out.master_port, out.rdzv_endpoint = (
            plan.master_addr, plan.master_port, "")
        # the store key prefix: it must be the same on every node (torchrun's default "none");
        # left empty, elastic_launch makes a random one per node and multi-node static hangs
        out.rdzv_id = ns.rdzv_id or "none"
    else:
        out.rdzv_endpoint = plan.rdzv_endpoint
        out.master_port = plan.master_port or None
        if out.rdzv_id in (None, "none"):
            out.rdzv_id = str(uuid.uuid4())
    return out


def log_to(run: RunDir) -> list[logging.StreamHandler[Any]]:
    """torchelastic's log: everything to logs/launcher.log, warnings also to the console."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    to_file = logging.StreamHandler(run.append("logs/launcher.log"))
    to_console = logging.StreamHandler()
    to_console.setLevel(logging.WARNING)
    logger = logging.getLogger(ELASTIC_LOGGER)
    for handler in (to_file, to_console):
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return [to_file, to_console]


def run_job(plan: LaunchPlan, ns: argparse.Namespace, run: RunDir, node_rank: int,
            echo: Callable[[int, int], bool]) -> JobOutcome:
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args

    from distrun.launch.logs import RunDirLogsSpecs

    config, entry, entry_args = config_from_args(torchrun_args(plan, ns, node_rank))
    specs = RunDirLogsSpecs(run, node_rank, echo)
    config.logs_specs = specs
    handlers = log_to(run)
    try:
        return _run(lambda: elastic_launch(config, entry)(*entry_args))
    finally:
        specs.stop()
        for handler in handlers:
            logging.getLogger(ELASTIC_LOGGER).removeHandler(handler)
            handler.close()
        if handler is handlers[0]:
            handlers[0].stream.close()


def _run(start: Callable[[], Any]) -> JobOutcome:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        start()
    except ChildFailedError as err:
        return _failed(err)
    except SignalException as err:
        return JobOutcome(JobStatus.INTERRUPTED, 128 + int(err.sigval),
                          message=f"received {err.sigval.name}")
    except KeyboardInterrupt:
        return JobOutcome(JobStatus.INTERRUPTED, 128 + signal.SIGINT, message="received SIGINT")
    except Exception as err:  # rendezvous and store errors end the job; their text is the report
        text = f"{type(err).__name__}: {err}"
        logging.getLogger(ELASTIC_LOGGER).error("the launcher failed before any rank ran: %s", text)
        return JobOutcome(JobStatus.FAILED, 1, message=text.splitlines()[0])
    return JobOutcome(JobStatus.SUCCEEDED, 0)


def rank_failure(rank: int, failure: Any, first: bool) -> RankFailure:
    """torchelastic's ProcessFailure as a typed value."""
    return RankFailure(
        rank=rank, local_rank=failure.local_rank, pid=failure.pid, exitcode=failure.exitcode,
        signal=failure.signal_name() if failure.exitcode < 0 else None,
        time=float(failure.timestamp) if failure.timestamp else None,
        error_file=failure.error_file, message=_message(failure), first=first)


def _failed(err: Any) -> JobOutcome:
    first, failure = err.get_first_failure()
    failures = tuple(rank_failure(rank, f, rank == first)
                     for rank, f in sorted(err.failures.items()))
    code = failure.exitcode if failure.exitcode > 0 else 128 - failure.exitcode
    return JobOutcome(JobStatus.FAILED, code, failures, first, _message(failure))


def _message(failure: Any) -> str:
    """The rank's own error when it recorded one, else how it ended."""
    data = failure.error_file_data.get("message") if failure.error_file_data else None
    text = data.get("message") if isinstance(data, dict) else data
    if text and text != "<NONE>":
        return str(text).strip().splitlines()[-1]
    if failure.exitcode < 0:
        return f"killed by {failure.signal_name()}"
    return f"exited with code {failure.exitcode}"


def launch(plan: LaunchPlan, ns: argparse.Namespace, run: RunDir, node_rank: int,
           echo: Callable[[int, int], bool]) -> JobOutcome:
    """Start, wait, and leave nothing behind."""
    apply_env(plan, node_rank, os.environ)
    run.event("launch_started", pid=os.getpid(), host=socket.gethostname(), node_rank=node_rank,
              world_size=plan.world_size, nproc_per_node=plan.nproc_per_node,
              backend=plan.backend)
    subreaper = reaper.become_subreaper()
    guard = guardian.start(run.path)  # ends the ranks if this process is killed
    started = time.monotonic()
    timeout, action = getattr(ns, "stall_timeout", None), getattr(ns, "stall_action", "stop")
    instrumented = instrument.enabled(os.environ, getattr(ns, "no_instrument", False))
    config = WatchConfig(timeout or 30.0, action, stall_stops=timeout is not None,
                         instrumented=instrumented)
    actions = LauncherActions(run)
    watcher = watch(run, plan, config, actions)
    hangs, saved = _hang_watch(run, plan.nodes[node_rank].ranks, timeout, action,
                               actions.stop) if instrumented else (None, {})
    try:
        outcome = run_job(plan, ns, run, node_rank, echo)
    finally:
        verdict = watcher.stop()
        hung = hangs.stop() if hangs is not None else None
        _restore(saved)
    if hung is not None:
        verdict = None
        outcome = JobOutcome(JobStatus.STALLED, EXIT_STALLED, outcome.failures,
                             hung.verdict.culprits[0], hung.message)
    if verdict is not None and verdict.stopped:
        outcome = JobOutcome(JobStatus.STALLED, EXIT_STALLED, outcome.failures,
                             verdict.ranks[0] if verdict.ranks else None, verdict.message)
    for failure in outcome.failures:
        run.event("rank_exited", rank=failure.rank, **failure.event_fields())
    orphans = reaper.sweep()
    if orphans:
        run.event("orphans_ended", subreaper=subreaper, processes=orphans)
    run.event("job_finished", exitcode=outcome.exitcode, status=outcome.status.value,
              duration_s=round(time.monotonic() - started, 3), message=outcome.message)
    guard.release()
    return outcome


def _hang_watch(run: RunDir, ranks: list[int], timeout: float | None, action: str,
                stop_job: Callable[[list[int]], None]) -> tuple[HangWatch, dict[str, str | None]]:
    """Instrument the workers (their environment) and start the hang watch beside them."""
    extra = instrument.worker_env(os.environ)
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    (run.path / instrument.PROGRESS_DIR).mkdir(mode=0o700, exist_ok=True)
    hangs = HangWatch(run, ranks, HangConfig(stall_timeout_s=timeout, action=action),
                      stop_job=stop_job)
    hangs.start()
    return hangs, saved


def _restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
