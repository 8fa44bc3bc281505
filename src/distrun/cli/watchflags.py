"""``distrun launch``'s monitoring flags (each may also come from DISTRUN_<FLAG>)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from distrun.cli import envflags


def seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def add_watch_flags(group: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    actions = [
        group.add_argument("--stall-timeout", type=seconds, default=None, metavar="SECONDS",
                           help="stop the job after this long without progress (collectives, "
                                "or ctx.step heartbeats); a hang inside torch.distributed is "
                                "stopped after 10 s at the earliest; default: name the culprit "
                                "and warn, stop only when the backend's own timeout would fire"),
        group.add_argument("--stall-action", choices=("stop", "warn"), default="stop",
                           help="when a hang cannot resolve (collective mismatch, a rank "
                                "gone, a timeout reached): stop the job with a verdict "
                                "(default), or only warn"),
        group.add_argument("--no-instrument", action="store_true", default=False,
                           help="do not instrument the ranks (no join proof or hang verdict "
                                "from the process group); also DISTRUN_NO_INSTRUMENT=1"),
    ]
    envflags.apply(actions, env)
