"""``distrun launch``'s monitoring flags (each may also come from DISTRUN_<FLAG>)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from distrun.cli import envflags
from distrun.launch.options import DEFAULT_STALL_TIMEOUT_S


def seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def add_watch_flags(group: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    actions = [
        group.add_argument("--stall-timeout", type=seconds, default=DEFAULT_STALL_TIMEOUT_S,
                           metavar="SECONDS",
                           help="a rank whose heartbeat (ctx.step) is older than this is "
                                "stalled (default 30)"),
        group.add_argument("--stall-action", choices=("stop", "warn"), default="stop",
                           help="on a stall: stop the job with a verdict (default), or only "
                                "warn"),
    ]
    envflags.apply(actions, env)
