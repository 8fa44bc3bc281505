"""``distrun report RUN_DIR [-o FILE]``: a self-contained HTML page of a run (no network):
loss, throughput per rank, device utilisation over time, events, and the rank table."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from distrun.cli import exitcodes
from distrun.cli.args import OneLineParser
from distrun.cli.monitor import resolve
from distrun.errors import UsageError
from distrun.model.rundir import RunDirError, write_text
from distrun.monitor.report import render


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="distrun report", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", help="the run directory (default: newest under ./runs)")
    p.add_argument("-o", "--output", help="where the page goes (default RUN_DIR/report.html)")
    return p


def main(argv: list[str]) -> int:
    ns = parser().parse_args(argv)
    run = resolve(ns.run_dir, os.environ)
    out = Path(ns.output) if ns.output else run / "report.html"
    try:
        write_text(out, render(run))
    except RunDirError as exc:
        raise UsageError(str(exc), fix="pass -o with a new file") from None
    except OSError as exc:
        raise UsageError(f"cannot write the report to {out}: {exc.strerror or exc}",
                         fix="pass -o with a file in a folder you can write") from None
    print(f"distrun report: {out}", file=sys.stderr)
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
