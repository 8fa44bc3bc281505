"""``ctx.logger``: the main rank logs to stderr; every other rank to its own log.

Under ``distrun launch`` each rank's stderr already is its own log (``logs/rank-<R>.log`` in
the run directory), so every rank writes to stderr there. Elsewhere (torchrun, mpirun, srun)
ranks other than 0 write to ``$DISTRUN_LOG_DIR/rank-<R>.log`` (default ``./distrun-logs``),
created on the first record. Nothing is configured at import time, and the root logger is
left alone.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

FORMAT = "%(asctime)s [rank {rank}] %(levelname)s %(message)s"


def log_path(rank: int, env: Mapping[str, str]) -> str | None:
    """Where a non-main rank's logger writes; None: stderr (rank 0, or under distrun launch)."""
    if rank == 0 or env.get("DISTRUN_RUN_DIR"):
        return None
    folder = env.get("DISTRUN_LOG_DIR") or "distrun-logs"
    return os.path.join(os.path.abspath(folder), f"rank-{rank}.log")


class _LazyFileHandler(logging.FileHandler):
    """A file handler whose folder is made with the file, on the first record."""

    def _open(self):  # type: ignore[no-untyped-def]
        os.makedirs(os.path.dirname(self.baseFilename), exist_ok=True)
        return super()._open()


def rank_logger(rank: int, path: str | None) -> logging.Logger:
    logger = logging.getLogger(f"distrun.rank{rank}")
    if logger.handlers:
        return logger
    handler: logging.Handler
    if path is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        handler = _LazyFileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter(FORMAT.format(rank=rank)))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger
