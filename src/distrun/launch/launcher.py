"""Run a checked plan through torch's elastic launcher; the only step with effects."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from distrun import instrument
from distrun.launch import guardian, reaper
from distrun.launch.firstfail import is_consequence, reorder
from distrun.launch.options import LaunchOptions
from distrun.launch.torchrun import namespace
from distrun.launch.unblock import (
    endpoint_port,
    restore_handlers,
    stop_handlers,
    stop_signals_unblock_store,
)
from distrun.model.plan import LaunchPlan
from distrun.model.record import EXIT_STALLED, JobOutcome, JobStatus, RankFailure
from distrun.model.rundir import RunDir, spared, utc_stamp
from distrun.model.terminal import to_console

if TYPE_CHECKING:
    from distrun.monitor.watcher import Verdict, Watcher

ELASTIC_LOGGER = "torch.distributed.elastic"
DEFAULT_STALL_S = 30.0  # the heartbeat stall the watcher judges when no --stall-timeout is set


def apply_env(plan: LaunchPlan, node_rank: int, env: MutableMapping[str, str]) -> None:
    """Job defaults (the user's own variables win) and this node's visible devices."""
    for key, value in plan.env.items():
        env.setdefault(key, value)
    env.update(plan.nodes[node_rank].env)
    if any(f.id == "libuv-missing" for f in plan.findings):
        env["USE_LIBUV"] = "0"


class Watching:
    """The watcher (one loop over the detectors; on an instrumented run also the join proof and
    the hang detector), imported and started on its own thread, so that its imports run while
    torchrun starts the workers instead of before (benchmarks/launch_overhead.py). The workers'
    instrumentation is set up at once: it is their environment."""

    def __init__(self, run: RunDir, plan: LaunchPlan, options: LaunchOptions,
                 node_rank: int, interrupted: threading.Event) -> None:
        self.watcher: Watcher | None = None
        self.interrupted = interrupted  # set at a stop signal to the launcher (unblock.py)
        self.instrumented = instrument.enabled(os.environ, options.no_instrument)
        self.saved = _instrument(run) if self.instrumented else {}
        if self.instrumented and options.stall_timeout_s is not None \
                and options.stall_action == "stop":
            from distrun.monitor.hang import timeout_note

            if note := timeout_note(options.stall_timeout_s):
                to_console(sys.stderr, note + "\n")
        self._thread = threading.Thread(target=self._start, daemon=True,
                                        args=(run, plan, options, node_rank),
                                        name="distrun-watch-start")
        self._thread.start()

    def _start(self, run: RunDir, plan: LaunchPlan, options: LaunchOptions,
               node_rank: int) -> None:
        try:
            from distrun.monitor.watcher import LauncherActions, WatchConfig, watch

            timeout = options.stall_timeout_s
            config = WatchConfig(timeout or DEFAULT_STALL_S, options.stall_action,
                                 stall_stops=timeout is not None, instrumented=self.instrumented)
            extra = []
            if self.instrumented:
                from distrun.monitor.hangdetect import HangConfig, hang_detectors

                extra = hang_detectors(plan.nodes[node_rank].ranks, HangConfig(
                    stall_timeout_s=timeout, action=options.stall_action))
            self.watcher = watch(run, plan, config, LauncherActions(run), extra_detectors=extra,
                                 interrupted=self.interrupted)
        except Exception as exc:  # the job runs on unwatched; the record and the console say so
            text = f"{type(exc).__name__}: {exc}"
            run.event("monitor_error", error=text)
            logging.getLogger(ELASTIC_LOGGER).error("distrun: monitor did not start: %s", text)

    def stop(self) -> tuple[Verdict | None, str]:
        """The verdict, and the hang in progress (named, not resolved; "" when none)."""
        self._thread.join()
        verdict = self.watcher.stop() if self.watcher is not None else None
        _restore(self.saved)
        return verdict, self.watcher.ongoing if self.watcher is not None else ""


def _instrument(run: RunDir) -> dict[str, str | None]:
    """The workers' environment that instruments them; what it replaced, to restore after."""
    extra = instrument.worker_env(os.environ)
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    (run.path / instrument.PROGRESS_DIR).mkdir(mode=0o700, exist_ok=True)
    return saved


def _restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class _Spared(logging.StreamHandler[Any]):
    """launcher.log: a record that cannot be written (disk full) is one warning, no traceback."""

    def handleError(self, record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError) and spared(exc, "logs/launcher.log"):
            return
        super().handleError(record)


class _UtcFormatter(logging.Formatter):
    """launcher.log's times on the run's one clock (UTC, microseconds; see ``utc_stamp``):
    logging's default is local time to the millisecond, which ``diagnose`` cannot place
    against events.jsonl and the rank logs (off by the time zone, or a stop's own SIGTERM
    line stamped before the verdict that sent it)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_stamp(record.created)


def log_to(run: RunDir) -> list[logging.StreamHandler[Any]]:
    """torchelastic's log: everything to logs/launcher.log, warnings also to the console."""
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    to_file = _Spared(run.append("logs/launcher.log"))
    to_console = logging.StreamHandler()
    to_console.setLevel(logging.WARNING)
    logger = logging.getLogger(ELASTIC_LOGGER)
    for handler, formatter in ((to_file, _UtcFormatter(fmt)), (to_console, logging.Formatter(fmt))):
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return [to_file, to_console]


def run_job(plan: LaunchPlan, run: RunDir, node_rank: int,
            echo: Callable[[int, int], bool], machine_stdout: bool = False, *,
            interrupted: threading.Event | None = None) -> JobOutcome:
    """This node's invocation, exactly as the plan holds it, through torchrun's own config.
    ``machine_stdout``: distrun's stdout is for its JSON, the ranks' stdout goes to stderr.
    ``interrupted`` is set when a stop signal reaches this process."""
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args

    from distrun.launch.logs import RunDirLogsSpecs

    config, entry, entry_args = config_from_args(namespace(plan.nodes[node_rank].invocation))
    specs = RunDirLogsSpecs(run, node_rank, echo, machine_stdout)
    config.logs_specs = specs
    handlers = log_to(run)
    try:
        with stop_signals_unblock_store(endpoint_port(config.rdzv_endpoint), interrupted):
            outcome = _run(lambda: elastic_launch(config, entry)(*entry_args))
    finally:
        specs.stop()
        for handler in handlers:
            logging.getLogger(ELASTIC_LOGGER).removeHandler(handler)
            handler.close()
        if handler is handlers[0]:
            handlers[0].stream.close()
    return _complete(reorder(outcome, run.logs), specs.lost_streams)


def _complete(outcome: JobOutcome, lost: list[str]) -> JobOutcome:
    """A job whose rank logs lost lines keeps its exit status but is not "succeeded"."""
    if not lost:
        return outcome
    status = outcome.status
    if status is JobStatus.SUCCEEDED:
        status = JobStatus.SUCCEEDED_LOGS_INCOMPLETE
    note = f"rank logs incomplete: {', '.join(lost)} could not be drained"
    message = f"{outcome.message}; {note}" if outcome.message else note
    return replace(outcome, status=status, message=message, logs_complete=False)


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


def launch(plan: LaunchPlan, options: LaunchOptions, run: RunDir, node_rank: int,
           echo: Callable[[int, int], bool]) -> JobOutcome:
    """Start, wait, and leave nothing behind."""
    apply_env(plan, node_rank, os.environ)
    run.event("launch_started", pid=os.getpid(), host=socket.gethostname(), node_rank=node_rank,
              world_size=plan.world_size, nproc_per_node=plan.nproc_per_node,
              backend=plan.backend)
    subreaper = reaper.become_subreaper()
    guard = guardian.start(run.path)  # ends the ranks if this process is killed
    started = time.monotonic()
    interrupted = threading.Event()
    watching = Watching(run, plan, options, node_rank, interrupted)
    handlers = stop_handlers()
    try:
        outcome = run_job(plan, run, node_rank, echo, options.json, interrupted=interrupted)
    finally:
        verdict, ongoing = watching.stop()
    outcome = _judged(outcome, verdict, ongoing)
    for failure in outcome.failures:
        run.event("rank_exited", rank=failure.rank, **failure.event_fields())
    orphans = reaper.sweep(keep=guard.pid)
    if orphans:
        run.event("orphans_ended", subreaper=subreaper, processes=orphans)
    run.event("job_finished", exitcode=outcome.exitcode, status=outcome.status.value,
              duration_s=round(time.monotonic() - started, 3), message=outcome.message)
    guard.release()
    restore_handlers(handlers)
    return outcome


def _own_fault(outcome: JobOutcome) -> bool:
    """The job failed because a rank failed of its own (a cause, not stopped by distrun)."""
    first = next((f for f in outcome.failures if f.first), None)
    return first is not None and first.signal is None and not is_consequence(first, None)


def _judged(outcome: JobOutcome, verdict: Verdict | None, ongoing: str = "") -> JobOutcome:
    """A job distrun stopped because it hung or stalled ends as ``stalled`` (exit 124); one
    interrupted during a hang says which (``ongoing``: as it was named before the signal)."""

    if _own_fault(outcome):  # a rank raised: the hang it left behind is a consequence
        return outcome
    if verdict is not None and verdict.stopped:
        return JobOutcome(JobStatus.STALLED, EXIT_STALLED, outcome.failures,
                          verdict.ranks[0] if verdict.ranks else None, verdict.message,
                          outcome.logs_complete)
    if outcome.status is JobStatus.INTERRUPTED and ongoing:
        return replace(outcome, message=f"{outcome.message} while a hang was in progress: "
                                        f"{ongoing}")
    return outcome
