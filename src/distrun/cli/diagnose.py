"""``distrun diagnose PATH... [--json]``: why did the job die?

PATH is a run directory written by ``distrun launch``, any directory of logs,
or log files (torchrun output, Slurm output, torchelastic ``error.json``).

Output: the root cause, how sure (confidence high/medium/low), the failing
rank and node, the evidence lines (file:line) and the fix, on stdout.
``--json`` (or ``DISTRUN_DIAGNOSE_JSON=1``) prints ``{"verdict", "confidence",
"causes": [...], "unrecognised": [...], "failed_ranks": [...]}`` instead, most
likely cause first; ``causes`` is empty when nothing is recognised.

Exit status:
  0  a known cause was found, or no error line was found;
  1  something failed (error lines or a non-zero rank exit) but no rule knows
     it: the earliest error lines are printed instead of a guess;
  2  bad input (a path that does not exist, a FIFO or device, a binary file,
     a directory without logs); one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from distrun.cli.args import OneLineParser
from distrun.cli.envflags import parse_bool
from distrun.diagnose import diagnose, write_json, write_text
from distrun.diagnose.reading import InputError, check_path

EXIT_FOUND_OR_CLEAN = 0
EXIT_UNKNOWN_FAILURE = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="distrun diagnose",
        description="Find the root cause of a failed distributed run.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="run directory, log directory or log file")
    parser.add_argument("--json", action="store_true",
                        help="machine-readable output (env: DISTRUN_DIAGNOSE_JSON=1)")
    return parser


def main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)
    try:
        for path in args.paths:
            check_path(path)
    except InputError as err:
        sys.stderr.write(f"distrun diagnose: error: {err}\n")
        return EXIT_USAGE
    result = diagnose(args.paths)
    if args.json or parse_bool("DISTRUN_DIAGNOSE_JSON", env.get("DISTRUN_DIAGNOSE_JSON", "")):
        write_json(result, sys.stdout)
    else:
        write_text(result, sys.stdout)
    if result.causes or not result.failed:
        return EXIT_FOUND_OR_CLEAN
    return EXIT_UNKNOWN_FAILURE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
