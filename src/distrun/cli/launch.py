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

from rich.console import Console

from distrun.checks.preflight import preflight
from distrun.cli import exitcodes, render
from distrun.cli.args import make_parser, parse, to_request
from distrun.cli.watchflags import add_watch_flags
from distrun.cluster.slurm import node_address
from distrun.errors import UsageError
from distrun.launch import fanout, multinode
from distrun.launch.launcher import launch
from distrun.launch.rundir import RunDir, RunDirError, default_path, redact
from distrun.model.plan import LaunchPlan, Request
from distrun.model.record import JobOutcome, JobStatus
from distrun.plan.allocation import from_slurm


def parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = make_parser("distrun launch", env, need_torch=True)
    g = next(g for g in p._action_groups if g.title == "distrun")
    g.add_argument("--run-dir", default=env.get("DISTRUN_RUN_DIR"),
                   help="where the run directory goes (default ./runs/<UTC time>-<name>)")
    g.add_argument("--force", action="store_true", default=env.get("DISTRUN_FORCE") == "1",
                   help="launch even when preflight finds an error")
    g.add_argument("--dry-run", action="store_true", help="print the checked plan, start nothing")
    multinode.add_flags(g, env)
    add_watch_flags(g, env)
    return p


def check_script(ns: argparse.Namespace) -> None:
    if ns.module or ns.no_python or ns.run_path or os.path.isfile(ns.training_script):
        return
    raise UsageError(f"training script {ns.training_script!r} does not exist",
                     fix="pass the path of your script (or -m for a module)")


def main(argv: list[str]) -> int:
    env = os.environ
    p = parser(env)
    ns = parse(p, argv)
    if ns.inventory:
        raise UsageError(f"--inventory {ns.inventory} declares other machines; launch runs here",
                         fix="use 'distrun plan --inventory ...' to plan for other machines")
    check_script(ns)
    req = to_request(p, ns)
    if ns.hostfile:
        return fan_out(ns, argv, req)
    err = Console(stderr=True, soft_wrap=True)
    req, note = from_slurm(req, env, lambda node: node_address(node, env))
    if note:
        err.print(f"distrun: {note}", highlight=False, markup=False)
    plan = preflight(req, None, env)
    plan, ns, net = multinode.network(plan, ns, env)
    if ns.dry_run:
        render.plan(Console(soft_wrap=True), plan)
        return exitcodes.PREFLIGHT if plan.errors else exitcodes.OK
    render.findings(err, [f for f in plan.findings if f.severity != "info"])
    if plan.errors and not ns.force:
        err.print("distrun launch: refusing to start: preflight found errors "
                  "(fix them, or pass --force)", highlight=False)
        return exitcodes.PREFLIGHT
    plan, stop = multinode.sync(plan, ns, req.node_rank, net, err)
    if stop is not None:
        return stop
    return start(plan, ns, req.node_rank or 0, err)


def fan_out(ns: argparse.Namespace, argv: list[str], req: Request) -> int:
    """--hostfile: one distrun launch per host over ssh (--dry-run: print the commands)."""
    hosts = fanout.read_hostfile(ns.hostfile)
    script_at = len(argv) - len(ns.training_script_args) - 1
    commands = fanout.node_commands(argv, script_at, req, hosts, os.getcwd())
    if ns.dry_run:
        print("\n".join(shlex.join(c) for c in commands))
        return exitcodes.OK
    return fanout.run_all(commands, hosts)


def node_suffix(plan: LaunchPlan, node_rank: int) -> str:
    """Several nodes: the node rank (static rendezvous) or the host name (c10d decides ranks)."""
    if plan.nnodes == 1:
        return ""
    return f"-node{node_rank}" if plan.rdzv_backend == "static" else f"-{socket.gethostname()}"


def start(plan: LaunchPlan, ns: argparse.Namespace, node_rank: int, err: Console) -> int:
    name = Path(ns.training_script).stem + node_suffix(plan, node_rank)
    try:
        run = RunDir.create(Path(ns.run_dir) if ns.run_dir else default_path(name),
                            chosen=bool(ns.run_dir))
    except RunDirError as exc:
        raise UsageError(str(exc), fix="pass --run-dir with a new folder") from None
    run.write_json("plan.json", plan.model_dump())
    run.write_json("env.json", redact(os.environ))
    os.environ["DISTRUN_RUN_DIR"] = str(run.path.resolve())
    os.environ["DISTRUN_DEVICE_TYPE"] = plan.device_type
    os.environ["DISTRUN_BACKEND"] = plan.backend
    outcome = launch(plan, ns, run, node_rank, echo_filter(ns))
    summary = summarize(plan, outcome, run, node_rank)
    run.write_json("summary.json", summary)
    run.close()
    report(err, outcome, plan.world_size, run)
    if outcome.status is JobStatus.FAILED:
        explain(run.path)
    if ns.json:
        print(json.dumps(summary, indent=2))
    return outcome.exitcode


def explain(path: Path) -> None:
    """The root cause, from the run directory, printed last (to stderr)."""
    from distrun.diagnose import diagnose, write_text

    print("\ndistrun diagnose:", file=sys.stderr)
    write_text(diagnose([path]), sys.stderr)


def echo_filter(ns: argparse.Namespace) -> Callable[[int, int], bool]:
    """Rank 0 on the console; plus the local ranks torchrun's --local-ranks-filter names."""
    chosen = {int(r) for r in (ns.local_ranks_filter or "").split(",") if r.strip()}
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
    }


def report(err: Console, outcome: JobOutcome, world_size: int, run: RunDir) -> None:
    """One line on how the job ended (user and log text printed as text, never markup)."""
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


def say(err: Console, text: str) -> None:
    err.print(text, highlight=False, markup=False)


def tail(path: Path, n: int) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
