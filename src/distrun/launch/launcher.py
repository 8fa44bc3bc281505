"""Run a checked plan through torch's elastic launcher; the only step with effects."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distrun.launch import reaper
from distrun.launch.options import LaunchOptions
from distrun.launch.rundir import RunDir
from distrun.launch.torchrun import namespace
from distrun.model.plan import LaunchPlan

if TYPE_CHECKING:
    from distrun.monitor.watcher import Verdict, Watcher

ELASTIC_LOGGER = "torch.distributed.elastic"


@dataclass
class Outcome:
    """How the job ended, per rank where torchelastic says."""

    exitcode: int
    status: str
    failures: dict[int, dict[str, Any]] = field(default_factory=dict)
    first_failure: int | None = None
    message: str = ""


def apply_env(plan: LaunchPlan, node_rank: int, env: MutableMapping[str, str]) -> None:
    """Job defaults (the user's own variables win) and this node's visible devices."""
    for key, value in plan.env.items():
        env.setdefault(key, value)
    env.update(plan.nodes[node_rank].env)
    if any(f.id == "libuv-missing" for f in plan.findings):
        env["USE_LIBUV"] = "0"


class Watching:
    """The monitor, imported and started on its own thread, so that its imports run while
    torchrun starts the workers instead of before (benchmarks/launch_overhead.py)."""

    def __init__(self, run: RunDir, options: LaunchOptions) -> None:
        self.watcher: Watcher | None = None
        self._thread = threading.Thread(target=self._start, args=(run, options), daemon=True,
                                        name="distrun-watch-start")
        self._thread.start()

    def _start(self, run: RunDir, options: LaunchOptions) -> None:
        try:
            from distrun.monitor.watcher import watch

            self.watcher = watch(run, options.stall_timeout_s, options.stall_action)
        except Exception as exc:  # the job runs on unwatched; the record and the console say so
            text = f"{type(exc).__name__}: {exc}"
            run.event("monitor_error", error=text)
            logging.getLogger(ELASTIC_LOGGER).error("distrun: monitor did not start: %s", text)

    def stop(self) -> Verdict | None:
        self._thread.join()
        return self.watcher.stop() if self.watcher is not None else None


def log_to(run: RunDir) -> list[logging.Handler]:
    """torchelastic's log: everything to logs/launcher.log, warnings also to the console."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    to_file = logging.FileHandler(run.logs / "launcher.log", encoding="utf-8")
    to_console = logging.StreamHandler()
    to_console.setLevel(logging.WARNING)
    logger = logging.getLogger(ELASTIC_LOGGER)
    for handler in (to_file, to_console):
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return [to_file, to_console]


def run_job(plan: LaunchPlan, run: RunDir, node_rank: int,
            echo: Callable[[int, int], bool]) -> Outcome:
    """This node's invocation, exactly as the plan holds it, through torchrun's own config."""
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args

    from distrun.launch.logs import RunDirLogsSpecs

    args = namespace(plan.nodes[node_rank].invocation)
    config, entry, entry_args = config_from_args(args)
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


def _run(start: Callable[[], Any]) -> Outcome:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        start()
    except ChildFailedError as err:
        return _failed(err)
    except SignalException as err:
        return Outcome(128 + int(err.sigval), "interrupted", message=f"received {err.sigval.name}")
    except KeyboardInterrupt:
        return Outcome(128 + signal.SIGINT, "interrupted", message="received SIGINT")
    except Exception as err:  # rendezvous and store errors end the job; their text is the report
        text = f"{type(err).__name__}: {err}"
        logging.getLogger(ELASTIC_LOGGER).error("the launcher failed before any rank ran: %s", text)
        return Outcome(1, "failed", message=text.splitlines()[0])
    return Outcome(0, "succeeded")


def _failed(err: Any) -> Outcome:
    failures: dict[int, dict[str, Any]] = {}
    for rank, failure in err.failures.items():
        failures[rank] = {
            "local_rank": failure.local_rank,
            "pid": failure.pid,
            "exitcode": failure.exitcode,
            "signal": failure.signal_name() if failure.exitcode < 0 else None,
            "failed_at": failure.timestamp,
            "error_file": failure.error_file,
            "message": _message(failure),
        }
    first, failure = err.get_first_failure()
    for rank, record in failures.items():
        record["role"] = "first failure" if rank == first else "stopped or failed after"
    code = failure.exitcode if failure.exitcode > 0 else 128 - failure.exitcode
    return Outcome(code, "failed", failures, first, failures[first]["message"])


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
           echo: Callable[[int, int], bool]) -> Outcome:
    """Start, wait, and leave nothing behind."""
    apply_env(plan, node_rank, os.environ)
    run.event("launch_started", pid=os.getpid(), node_rank=node_rank, world_size=plan.world_size,
              nproc_per_node=plan.nproc_per_node, backend=plan.backend)
    subreaper = reaper.become_subreaper()
    started = time.monotonic()
    watcher = Watching(run, options)
    try:
        outcome = run_job(plan, run, node_rank, echo)
    finally:
        verdict = watcher.stop()
    if verdict is not None and verdict.stopped:
        from distrun.monitor.stall import EXIT_STALLED

        outcome = Outcome(EXIT_STALLED, "stalled", outcome.failures,
                          verdict.ranks[0] if verdict.ranks else None, verdict.message)
    for rank, failure in sorted(outcome.failures.items()):
        run.event("rank_exited", rank=rank, **failure)
    orphans = reaper.sweep()
    if orphans:
        run.event("orphans_ended", subreaper=subreaper, processes=orphans)
    run.event("job_finished", exitcode=outcome.exitcode, status=outcome.status,
              duration_s=round(time.monotonic() - started, 3), message=outcome.message)
    return outcome
