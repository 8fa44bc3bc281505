"""``distrun report RUN_DIR [-o FILE]``: a self-contained HTML page of a run (no network):
loss, throughput per rank, device utilisation over time, events, and the rank table.
``-o -`` writes the page to stdout."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from distrun.cli import exitcodes
from distrun.cli.args import OneLineParser
from distrun.cli.monitor import resolve
from distrun.errors import UsageError
from distrun.model.rundir import write_text
from distrun.monitor.report import render

STDOUT = "-"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="distrun report", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", help="the run directory (default: newest under ./runs)")
    p.add_argument("-o", "--output",
                   help="where the page goes (default RUN_DIR/report.html; '-': stdout)")
    return p


def main(argv: list[str]) -> int:
    ns = parser().parse_args(argv)
    run = resolve(ns.run_dir, os.environ, "report")
    page = render(run)
    if ns.output == STDOUT:
        sys.stdout.write(page)
        return exitcodes.OK
    out = Path(ns.output) if ns.output else run / "report.html"
    try:
        write_text(out, page)
    except OSError as exc:
        raise write_error(out, exc) from None
    print(f"distrun report: {out}", file=sys.stderr)
    return exitcodes.OK


def write_error(out: Path, exc: OSError) -> UsageError:
    """Why the page could not be written to ``out`` (never the temporary file's name) and the
    fix for that cause."""
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    if out.is_dir():
        fix = f"pass -o with a file name, e.g. -o {out / 'report.html'}"
    elif out.parent.exists() and not out.parent.is_dir():
        fix = f"{out.parent} is not a folder: pass -o with a file in a folder"
    elif not out.parent.is_dir():
        fix = f"create the folder {out.parent} first, or pass -o with a file in an existing folder"
    else:
        fix = "pass -o with a file in a folder you can write, or -o - for stdout"
    return UsageError(f"cannot write the report to {out}: {why}", fix=fix)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
