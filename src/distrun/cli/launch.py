"""``distrun launch [torchrun flags] [distrun flags] SCRIPT [ARGS]``.

Preflight (refuses on an error unless --force), then the job through torchrun, recorded in a
run directory. Exit status: the job's (see distrun.cli.exitcodes), 3 when preflight refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from distrun.checks.network import NetworkSetup
from distrun.checks.preflight import preflight
from distrun.cli import envflags, exitcodes
from distrun.cli.args import distrun_group, make_parser, parse, to_request
from distrun.cli.sources import about
from distrun.cli.watchflags import add_watch_flags
from distrun.errors import UsageError
from distrun.launch import multinode
from distrun.launch.launcher import launch
from distrun.launch.options import DEFAULT_MASTER_WAIT_S, LaunchOptions
from distrun.launch.rundir import RunDir, RunDirError, default_path, redact
from distrun.model.plan import Finding, LaunchPlan, Request
from distrun.model.record import JobOutcome, JobStatus, printable
from distrun.model.terminal import to_console

# Imported where needed, not here: each costs start-up time on every launch (see
# benchmarks/launch_overhead.py): rich (only to show findings or a plan), the Slurm
# allocation reader (only inside one), the --hostfile fan-out, the diagnosis.


class Stderr:
    """Plain lines to stderr with the call shape of rich's ``Console.print`` (no markup: the
    text may hold a user's or a log's brackets)."""

    def __init__(self) -> None:
        self.out: IO[str] | None = sys.stderr  # None once the console went away

    def print(self, text: str, **_: object) -> None:
        self.out = to_console(self.out, text + "\n")


def show_findings(items: list[Finding]) -> None:
    if items:
        from distrun.cli import render
        from distrun.cli.render import Console

        render.findings(Console(stderr=True, soft_wrap=True), items)


def parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = make_parser("distrun launch", env, need_torch=True)
    g = distrun_group(p)
    actions = [
        g.add_argument("--run-dir",
                       help="where the run directory goes (default ./runs/<UTC time>-<name>)"),
        g.add_argument("--force", action="store_true",
                       help="launch even when preflight finds an error"),
        g.add_argument("--dry-run", action="store_true",
                       help="print the checked plan (--json: as JSON), start nothing"),
        g.add_argument("--hostfile",
                       help="start one distrun launch per host over ssh ('host slots=N' lines)"),
        g.add_argument("--master-wait", type=float, default=DEFAULT_MASTER_WAIT_S,
                       metavar="SECONDS",
                       help="seconds the nodes wait for each other before training starts "
                            f"(default {DEFAULT_MASTER_WAIT_S:.0f})"),
    ]
    envflags.apply(actions, env)
    add_watch_flags(g, env)
    return p


def ranks_filter(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(r) for r in (text or "").split(",") if r.strip())
    except ValueError:
        raise UsageError(f"--local-ranks-filter {text!r} is not a list of local ranks",
                         fix="pass e.g. --local-ranks-filter 0,1") from None


def options_from(ns: argparse.Namespace) -> LaunchOptions:
    """The launch settings, once, from the parsed flags (DISTRUN_* and --config included)."""
    return LaunchOptions(run_dir=ns.run_dir, force=bool(ns.force), dry_run=bool(ns.dry_run),
                         json=bool(ns.json), hostfile=ns.hostfile, master_wait_s=ns.master_wait,
                         stall_timeout_s=ns.stall_timeout, stall_action=ns.stall_action,
                         no_instrument=bool(ns.no_instrument),
                         local_ranks_filter=ranks_filter(ns.local_ranks_filter))


def check_script(ns: argparse.Namespace) -> None:
    script = ns.training_script
    if ns.module or ns.no_python or ns.run_path or os.path.isfile(script):
        return
    if os.path.isdir(script):
        raise UsageError(f"training script {script!r} is a directory", "a Python file to run",
                         f"pass the script in it (e.g. {os.path.join(script, 'train.py')}), or "
                         "-m PACKAGE.MODULE for a module")
    raise UsageError(f"training script {script!r} does not exist",
                     fix="pass the path of your script (or -m for a module)")


def main(argv: list[str]) -> int:
    env = os.environ
    p = parser(env)
    ns, origins = parse(p, argv, env)
    with origins.blame():
        return launch_parsed(p, ns, argv, env)


def launch_parsed(p: argparse.ArgumentParser, ns: argparse.Namespace, argv: list[str],
                  env: Mapping[str, str]) -> int:
    if ns.inventory:
        raise UsageError(f"--inventory {ns.inventory} declares other machines; launch runs here",
                         fix="use 'distrun plan --inventory ...' to plan for other machines")
    check_script(ns)
    req, options = to_request(p, ns), options_from(ns)
    if options.hostfile:
        script_at = len(argv) - len(ns.training_script_args) - 1
        return fan_out(options, argv, script_at, req)
    err = Stderr()
    req, note = slurm_topology(req, env)
    if note:
        err.print(f"distrun: {note}", highlight=False, markup=False)
    node_rank = req.node_rank or 0
    plan, net = multinode.network(preflight(req, None, env), node_rank, env)
    plan = plan.with_findings(memory_findings(plan, node_rank, env))
    if options.dry_run:
        return dry_run(plan, options)
    show_findings([f for f in plan.findings if f.severity != "info"])
    if plan.errors and not options.force:
        err.print("distrun launch: refusing to start: preflight found errors "
                  "(fix them, or pass --force)", highlight=False)
        return exitcodes.PREFLIGHT
    plan, stop = sync_nodes(plan, req.node_rank, net, options, err)
    if stop is not None:
        return stop
    return start(plan, options, node_rank, err)


def memory_findings(plan: LaunchPlan, node_rank: int, env: Mapping[str, str]) -> list[Finding]:
    """Free memory per device, devices other processes hold, and whether the planned batch
    fits by the last measured fit (distrun.cli.memcheck)."""
    from distrun.cli.memcheck import launch_findings

    return launch_findings(plan, node_rank, env)


def slurm_topology(req: Request, env: Mapping[str, str]) -> tuple[Request, str | None]:
    """Inside a Slurm allocation: nodes, node rank and master from it (see plan.allocation)."""
    if "SLURM_JOB_ID" not in env:
        return req, None
    from distrun.cluster.slurm import node_address
    from distrun.plan.allocation import from_slurm

    return from_slurm(req, env, lambda node: node_address(node, env))


def dry_run(plan: LaunchPlan, options: LaunchOptions) -> int:
    if options.json:
        print(plan.model_dump_json(indent=2))
    else:
        from distrun.cli import render
        from distrun.cli.render import Console

        render.plan(Console(soft_wrap=True), plan)
    return exitcodes.PREFLIGHT if plan.errors else exitcodes.OK


def sync_nodes(plan: LaunchPlan, node_rank: int | None, net: NetworkSetup,
               options: LaunchOptions, err: Stderr) -> tuple[LaunchPlan, int | None]:
    """The nodes' exchange (multi-node), printed; (plan, exit status to stop with)."""
    def say(line: str) -> None:
        err.print(f"distrun: {line}", highlight=False, markup=False)

    done = multinode.sync(plan, node_rank, net, options.master_wait_s, say)
    if not done.ran:
        return done.plan, None
    if done.error is not None:
        err.print(f"distrun launch: preflight failed: {done.error}", highlight=False,
                  markup=False)
        return done.plan, exitcodes.PREFLIGHT
    show_findings(done.found)
    if any(f.severity == "error" for f in done.found) and not options.force:
        err.print("distrun launch: refusing to start: the nodes disagree (fix it, or pass "
                  "--force on every node)", highlight=False)
        return done.plan, exitcodes.PREFLIGHT
    say(f"all {plan.nnodes} nodes joined; starting torchrun")
    return done.plan, None


def fan_out(options: LaunchOptions, argv: list[str], script_at: int, req: Request) -> int:
    """--hostfile: one distrun launch per host over ssh (--dry-run: print the commands)."""
    from distrun.launch import fanout

    with about("--hostfile"):
        hosts = fanout.read_hostfile(str(options.hostfile))
    token = fanout.job_token(os.environ)  # sent on each ssh's stdin, never on a command line
    commands = fanout.node_commands(argv, script_at, req, hosts, os.getcwd(),
                                    token=token is not None)
    if options.dry_run:
        print("\n".join(shlex.join(c) for c in commands))
        return exitcodes.OK
    return fanout.run_all(commands, hosts, token)


def node_suffix(plan: LaunchPlan, node_rank: int) -> str:
    """Several nodes: the node rank (static rendezvous) or the host name (c10d decides ranks)."""
    if plan.nnodes == 1:
        return ""
    return f"-node{node_rank}" if plan.rdzv_backend == "static" else f"-{socket.gethostname()}"


def start(plan: LaunchPlan, options: LaunchOptions, node_rank: int, err: Stderr) -> int:
    name = Path(plan.script or "job").stem + node_suffix(plan, node_rank)
    try:
        run = RunDir.create(Path(options.run_dir) if options.run_dir else default_path(name),
                            chosen=bool(options.run_dir))
    except RunDirError as exc:
        refused = UsageError(str(exc), fix="pass --run-dir with a new folder")
        refused.flag = "--run-dir" if options.run_dir else None
        raise refused from None
    run.write_json("plan.json", stored_plan(plan))
    run.write_json("env.json", redact(os.environ))
    os.environ["DISTRUN_RUN_DIR"] = str(run.path.resolve())
    os.environ["DISTRUN_DEVICE_TYPE"] = plan.device_type
    os.environ["DISTRUN_BACKEND"] = plan.backend
    outcome = launch(plan, options, run, node_rank, echo_filter(options))
    summary = summarize(plan, outcome, run, node_rank)
    ooms = oom_messages(run.path)
    if ooms:
        summary["out_of_memory"] = ooms
    run.write_json("summary.json", summary)
    run.close()
    report(err, outcome, plan.world_size, run)
    for line in ooms:
        say(err, f"distrun: {printable(line)}")
    if outcome.status is JobStatus.FAILED:
        explain(run.path)
    if options.json:
        print(json.dumps(summary, indent=2))
    return outcome.exitcode


def stored_plan(plan: LaunchPlan) -> dict[str, object]:
    """plan.json: the plan as run, with credentials in the script's arguments redacted (the
    run directory may sit on shared storage; docs/run-directory.md says what is kept)."""
    from distrun.model.redact import redact_argv, redact_text

    data = plan.model_dump()
    data["script_args"] = redact_argv(plan.script_args)
    data["commands"] = [redact_text(c) for c in plan.commands]
    for node, stored in zip(plan.nodes, data["nodes"], strict=True):
        worker = stored.get("invocation", {}).get("worker")
        if isinstance(worker, dict) and "args" in worker:
            worker["args"] = redact_argv(node.invocation.worker.args)
    return data


def oom_messages(path: Path) -> list[str]:
    """The ranks' out-of-memory records (``rank_oom``), one sentence each (estimate.oom)."""
    from distrun.estimate.oom import report as oom_report
    from distrun.model.record import RankOom, read_events

    found, _bad = read_events(path / "events.jsonl")
    ranks: dict[int, RankOom] = {}
    for event in found:
        if isinstance(event, RankOom):
            ranks.setdefault(event.rank, event)
    return [oom_report(e).message for e in ranks.values()]


def explain(path: Path) -> None:
    """The root cause, from the run directory, printed last (to stderr)."""
    from distrun.diagnose import diagnose, write_text

    print("\ndistrun diagnose:", file=sys.stderr)
    try:
        write_text(diagnose([path]), sys.stderr)
    except OSError as exc:  # the job's own exit status stands, whatever the run folder holds
        print(f"distrun diagnose: not done: {exc}; run 'distrun diagnose {path}' once it is "
              "fixed", file=sys.stderr)


def echo_filter(options: LaunchOptions) -> Callable[[int, int], bool]:
    """Rank 0 on the console; plus the local ranks torchrun's --local-ranks-filter names."""
    chosen = set(options.local_ranks_filter)
    return lambda rank, local: rank == 0 or local in chosen


def summarize(plan: LaunchPlan, outcome: JobOutcome, run: RunDir,
              node_rank: int) -> dict[str, object]:
    return {
        "status": outcome.status.value,
        "exitcode": outcome.exitcode,
        "message": outcome.message,
        "world_size": plan.world_size,
        "nnodes": plan.nnodes,
        "node_rank": node_rank,
        "device_type": plan.device_type,
        "backend": plan.backend,
        "first_failure": outcome.first_failure,
        "failures": outcome.failures_json(),
        "run_dir": str(run.path),
        "logs_complete": outcome.logs_complete,
    }


def report(err: Stderr, outcome: JobOutcome, world_size: int, run: RunDir) -> None:
    """One line on how the job ended (user and log text printed as text, never markup)."""
    if outcome.status is JobStatus.SUCCEEDED_LOGS_INCOMPLETE:
        say(err, f"distrun: job succeeded ({world_size} ranks), but {outcome.message} (the "
                 f"raw output is under {run.path / 'torchrun'}); run directory: {run.path}")
        return
    if outcome.status is JobStatus.SUCCEEDED:
        say(err, f"distrun: job succeeded ({world_size} ranks); run directory: {run.path}")
        return
    first = outcome.first_failure
    if outcome.status is JobStatus.STALLED:
        say(err, f"distrun: job stopped after a stall (exit status {outcome.exitcode}): "
                 f"{outcome.message}; run directory: {run.path}")
        return
    if first is None:
        say(err, f"distrun: job {outcome.status.value}: {outcome.message}; run directory: "
                 f"{run.path}")
        return
    log = run.rank_log(first)
    say(err, f"distrun: job failed: rank {first} first ({outcome.message}); exit status "
             f"{outcome.exitcode}; its log: {log}")
    for line in tail(log, 8):
        say(err, f"  {line}")


def say(err: Stderr, text: str) -> None:
    err.print(text, highlight=False, markup=False)


def tail(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
