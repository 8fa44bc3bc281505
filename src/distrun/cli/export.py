"""``distrun export FORMAT [plan flags] [export flags] SCRIPT [ARGS]``: launch artefacts for
other tools (slurm, accelerate, deepspeed, k8s, shell), all from one checked plan.

Exit status 0; 2 for bad input; 3 when the plan has an error finding (nothing is written);
1 when ``--submit`` could not hand the script to sbatch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from distrun.checks.preflight import preflight
from distrun.cli import envflags, exitcodes, render
from distrun.cli.args import distrun_group, make_parser, parse, to_request
from distrun.cli.render import Console
from distrun.cli.sources import about
from distrun.cluster.slurm import expand_nodes
from distrun.errors import DistrunError, UsageError
from distrun.export import FORMATS, ExportOptions, Rendered, slurm
from distrun.export import render as render_export
from distrun.export.options import default_job_name
from distrun.launch.fanout import check_host, read_hostfile
from distrun.model.rundir import kind, write_text

SUBMIT_TIMEOUT_S = 60
_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--output", str, "write here instead of stdout (shell: a folder, one script per node)"),
    ("--job-name", str, "slurm/k8s job name (default: from the script name)"),
    ("--time", str, "slurm: time limit, e.g. 02:00:00"),
    ("--partition", str, "slurm: partition"),
    ("--account", str, "slurm: account"),
    ("--sbatch-output", str, "slurm: stdout path pattern (default %%x-%%j.out)"),
    ("--sbatch-error", str, "slurm: stderr path pattern (default %%x-%%j.err)"),
    ("--cpus-per-task", int, "slurm: cores per node task (default: threads x processes)"),
    ("--host", str, "deepspeed: the nodes' host names in node-rank order, comma-separated"),
    ("--hostfile", str, "deepspeed: the nodes' host names from a 'host slots=N' file"),
    ("--mpirun-hostfile", str, "accelerate on CPU: the mpirun hostfile the config names "
     "(default: hostfile)"),
    ("--image", str, "k8s: container image"),
    ("--namespace", str, "k8s: namespace"),
    ("--torchrun", str, "slurm/k8s/shell: the torchrun command on the nodes, split like a "
     "shell line (e.g. 'python -m torch.distributed.run' or 'distrun launch')"),
)


def add_export_flags(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    group = distrun_group(parser)
    actions = [group.add_argument(flag, type=kind, help=text) for flag, kind, text in _FLAGS]
    actions.append(group.add_argument("--submit", action="store_true",
                                      help="slurm: hand the script to sbatch, print the job id"))
    envflags.apply(actions, env)


def options_from(ns: argparse.Namespace) -> ExportOptions:
    given = {k: getattr(ns, k) for k in ("time", "partition", "account", "sbatch_output",
                                         "sbatch_error", "cpus_per_task", "image", "namespace",
                                         "torchrun", "mpirun_hostfile") if getattr(ns, k) is not None}
    return ExportOptions(job_name=ns.job_name or default_job_name(ns.training_script),
                         machine_rank=ns.node_rank or 0, hosts=hosts_from(ns, os.environ),
                         **given)


def hosts_from(ns: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, ...]:
    """--host a,b; else --hostfile FILE; else the Slurm allocation's node list; else ()."""
    if ns.host and ns.hostfile:
        raise UsageError("--host and --hostfile both given", "one list of hosts",
                         "drop one of them")
    if ns.host:
        names = [h.strip() for h in ns.host.split(",")]
        return tuple(check_host(h, f"--host {ns.host!r}") for h in names)
    if ns.hostfile:
        with about("--hostfile"):
            return tuple(h.name for h in read_hostfile(ns.hostfile))
    return expand_nodes(env) if env.get("SLURM_JOB_NODELIST") else ()


USAGE = (f"usage: distrun export {{{','.join(FORMATS)}}} [plan flags] [export flags] SCRIPT "
         "[ARGS]\n(the flags: 'distrun export slurm --help')")


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}", f"one of {', '.join(FORMATS)}",
                         "run e.g. 'distrun export slurm --inventory 2x8xH100-80GB train.py'")
    return fmt


def write(rendered: Rendered, output: str | None) -> None:
    """To stdout, or to ``output``; a path that cannot be written is one UsageError."""
    try:
        _write(rendered, output)
    except BrokenPipeError:
        raise  # stdout's reader left: a quiet exit 141 (cli.main), not a bad --output
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)  # not the temporary file's name
        raise UsageError(f"--output {output!r} cannot be written: {why}",
                         "a writable path (shell: a folder for one script per node)",
                         "pass --output a new file in a writable folder, or leave it out for "
                         "stdout") from None


def _write(rendered: Rendered, output: str | None) -> None:
    if isinstance(rendered, str):
        if output is None:
            sys.stdout.write(rendered)
        else:
            _replace(Path(output), rendered, 0o644)
        return
    if output is None:
        for name, text in rendered.items():
            sys.stdout.write(f"# ==> {name} <==\n{text}")
        return
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in rendered.items():
        _replace(folder / name, text, 0o755)


MARK = b"# Made by 'distrun export "  # the first lines of every file export writes
MARK_WITHIN = 512


def _replace(path: Path, text: str, mode: int) -> None:
    """``text`` as ``path``: a new file, or one an earlier export wrote (its mark in the first
    lines); anything else there (a user's file, a link, a device) is refused, never written
    through. Written to a new file beside it, then renamed over it (``rundir.write_text``)."""
    _overwritable(path)
    write_text(path, text, mode)


def _overwritable(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        with path.open("rb") as old:
            if MARK in old.read(MARK_WITHIN):
                return
        what = "a file distrun export did not write"
    else:
        what = kind(mode)
    raise UsageError(f"--output {str(path)!r} exists and is {what}: nothing was written over it",
                     "a new file, or one an earlier distrun export wrote",
                     "pass --output a new file name, or move that file away first")


def submit(script: str, env: Mapping[str, str]) -> str:
    """``sbatch --parsable`` with the script on stdin; returns the job id."""
    sbatch = shutil.which("sbatch", path=env.get("PATH"))
    if sbatch is None:
        raise DistrunError("sbatch is not on PATH", "a Slurm client on this machine",
                           "run on a login node of the cluster, or drop --submit and copy the "
                           "script there (--output FILE)")
    try:
        done = subprocess.run([sbatch, "--parsable"], input=script, capture_output=True,
                              text=True, timeout=SUBMIT_TIMEOUT_S, check=False, env=dict(env))
    except subprocess.TimeoutExpired:
        raise DistrunError(f"sbatch did not answer within {SUBMIT_TIMEOUT_S} s",
                           "a reachable slurmctld", "check 'sinfo' and the controller") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise DistrunError(f"sbatch refused the script (exit {done.returncode}): {tail}",
                           "a job the cluster accepts",
                           "fix the partition/account/time (see 'sinfo'), or --output FILE "
                           "and submit by hand")
    return done.stdout.strip().split(";")[0]


def main(argv: list[str]) -> int:
    env = os.environ
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return exitcodes.OK if argv else exitcodes.USAGE
    fmt = check_format(argv[0])
    parser = make_parser(f"distrun export {fmt}", env, need_torch=False)
    add_export_flags(parser, env)
    ns, origins = parse(parser, argv[1:], env)  # the same settings as 'plan', --config included
    with origins.blame():
        return export(fmt, parser, ns, env)


def export(fmt: str, parser: argparse.ArgumentParser, ns: argparse.Namespace,
           env: Mapping[str, str]) -> int:
    if ns.submit and fmt != "slurm":
        raise UsageError(f"--submit with format {fmt!r}", "--submit only with 'slurm'",
                         "drop --submit")
    options = options_from(ns)
    plan = preflight(to_request(parser, ns), ns.inventory, env)
    if plan.errors:
        render.findings(Console(stderr=True), plan.findings)
        print(f"distrun export: not written: the plan has {len(plan.errors)} error(s)",
              file=sys.stderr)
        return exitcodes.PREFLIGHT
    if not ns.submit:
        write(render_export(fmt, plan, options), ns.output)
        return exitcodes.OK
    script = slurm.render(plan, options)
    if ns.output:
        write(script, ns.output)
    job_id = submit(script, env)
    print(job_id)
    print(f"distrun export: submitted batch job {job_id}", file=sys.stderr)
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
