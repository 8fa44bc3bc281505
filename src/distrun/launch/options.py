"""``distrun launch``'s own settings as one frozen value, built once by the CLI from flags,
``DISTRUN_*`` variables and ``--config``; what launch/ receives instead of argparse's namespace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_MASTER_WAIT_S = 300.0


@dataclass(frozen=True)
class LaunchOptions:
    run_dir: str | None = None
    force: bool = False
    dry_run: bool = False
    json: bool = False
    hostfile: str | None = None
    master_wait_s: float = DEFAULT_MASTER_WAIT_S
    stall_timeout_s: float | None = None  # None: name and warn, stop only when hopeless
    no_instrument: bool = False
    stall_action: Literal["stop", "warn"] = "stop"
    local_ranks_filter: tuple[int, ...] = ()
