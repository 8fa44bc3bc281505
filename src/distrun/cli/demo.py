"""``distrun demo [launch flags]``: a real small training run on whatever is here.

It is ``distrun launch`` on the built-in script (one process per device; 2 on CPU with
gloo), followed by a summary: world size, devices, steps per second, final loss, run dir.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from distrun.accelerators.detect import detect
from distrun.cli import exitcodes
from distrun.cli import launch as launch_cli
from distrun.cli.render import Console
from distrun.errors import UsageError
from distrun.launch.rundir import default_path
from distrun.model import rundir


def main(argv: list[str]) -> int:
    script = str(resources.files("distrun.demo") / "train.py")
    try:
        run_dir = rundir.create(default_path("demo"), chosen=False)  # empty: launch takes it
    except rundir.RunDirError as exc:
        raise UsageError(str(exc), fix="run distrun demo from a folder where it can create "
                         "runs/ (or move what is in the way)") from None
    flags = list(argv)
    if "--nproc-per-node" not in flags and not detect().node.is_accelerated:
        flags += ["--nproc-per-node", "2"]
    code = launch_cli.main([*flags, "--run-dir", str(run_dir), script])
    if code != exitcodes.OK:
        return code
    return summary(run_dir)


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
