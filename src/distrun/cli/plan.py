"""``distrun plan [torchrun flags] [--inventory NxDxMODEL] [--json] SCRIPT [ARGS]``.

Exit status 0, or 3 when any finding is an error.
"""

from __future__ import annotations

import os
import sys

from distrun.checks.preflight import preflight
from distrun.cli import exitcodes, render
from distrun.cli.args import make_parser, parse, to_request
from distrun.cli.render import Console


def main(argv: list[str]) -> int:
    env = os.environ
    parser = make_parser("distrun plan", env, need_torch=False)
    ns, origins = parse(parser, argv, env)
    with origins.blame():
        plan = preflight(to_request(parser, ns), ns.inventory, env)
    if ns.json:
        print(plan.model_dump_json(indent=2))
    else:
        render.plan(Console(soft_wrap=True), plan)
    return exitcodes.PREFLIGHT if plan.errors else exitcodes.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
