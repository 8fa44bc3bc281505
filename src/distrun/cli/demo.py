"""``distrun demo [launch flags]``: a real small training run on whatever is here.

It is ``distrun launch`` on the built-in script (one process per device; 2 on CPU with
gloo), followed by a summary: world size, devices, steps per second, final loss, run dir.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from distrun.accelerators.detect import detect
from distrun.cli import exitcodes
from distrun.cli import launch as launch_cli
from distrun.cli.args import parse
from distrun.cli.render import Console
from distrun.errors import UsageError
from distrun.launch.rundir import default_path
from distrun.model import rundir

DESCRIPTION = ("A real small training run on whatever is here: 'distrun launch' on a built-in "
               "script (one process per device; 2 on CPU with gloo), then a summary: world "
               "size, devices, steps per second, final loss, run directory. It takes launch's "
               "flags (below); the training script is its own.")


def parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """launch's parser (demo takes its flags), with demo's name, usage and description."""
    p = launch_cli.parser(env)
    p.prog, p.usage = "distrun demo", "distrun demo [launch flags]"
    p.description = DESCRIPTION
    for action in p._actions:
        if not action.option_strings:  # the script and its arguments: demo's own
            action.help = argparse.SUPPRESS
    return p


def main(argv: list[str]) -> int:
    script = str(resources.files("distrun.demo") / "train.py")
    # --help, and usage errors, before anything is made
    parse(parser(os.environ), [*argv, script], os.environ)
    path = default_path("demo")
    made = [path.parent] if not path.parent.exists() else []
    try:
        run_dir = rundir.create(path, chosen=False)  # empty: launch takes it
    except rundir.RunDirError as exc:
        raise UsageError(str(exc), fix="run distrun demo from a folder where it can create "
                         "runs/ (or move what is in the way)") from None
    flags = list(argv)
    if "--nproc-per-node" not in flags and not detect().node.is_accelerated:
        flags += ["--nproc-per-node", "2"]
    try:
        code = launch_cli.main([*flags, "--run-dir", str(run_dir), script])
    except UsageError:  # refused before it started: leave nothing behind
        _remove_if_empty(run_dir, *made)
        raise
    if code != exitcodes.OK:
        return code
    return summary(run_dir)


def _remove_if_empty(*paths: Path) -> None:
    """Each folder in turn, while empty (one a run wrote into stays, and what follows it)."""
    for path in paths:
        try:
            path.rmdir()
        except OSError:
            return


def summary(run_dir: Path) -> int:
    console = Console()
    try:
        result = json.loads((run_dir / "demo.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        console.print(f"distrun demo: the job ended but wrote no result ({exc})", markup=False)
        return exitcodes.JOB_FAILED
    losses = result["losses"]
    falling = losses[-1] < losses[0]
    console.print("\n[bold]distrun demo: summary[/]")
    console.print(f"  world size      {result['world_size']} ranks ({result['backend']})", markup=False)
    console.print(f"  devices used    {', '.join(result['devices'])}", markup=False)
    console.print(f"  steps/second    {result['steps_per_second']:.1f} "
                  f"({result['steps']} steps)", markup=False)
    console.print(f"  loss            {losses[0]:.4f} -> {losses[-1]:.4f} "
                  f"({'falling' if falling else 'NOT falling'})", markup=False)
    console.print(f"  final loss      {result['final_loss']:.4f}", markup=False)
    console.print(f"  run directory   {run_dir}", markup=False)
    return exitcodes.OK if falling else exitcodes.JOB_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
