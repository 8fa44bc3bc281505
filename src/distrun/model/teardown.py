"""One fact about tearing a gloo process group down, shared by the runtime
(``distrun.shutdown``) and the per-rank instrumentation (its ``destroy_process_group`` wrapper).

torch 2.13: a collective's caller returns when gloo's worker thread marks the work done; the
worker frees the work (and with it the last C++ reference to the caller's tensor, which needs
the GIL) a moment later. ``~ProcessGroupGloo`` joins that worker; torch's Python handle of a
group lets the GIL go first, but DDP's Reducer holds the group from C++ and frees it with the
GIL held. When the model goes in that moment (``main()`` returning right after the last
collective and the destroy), each waits for the other for ever: a finished rank that never
exits (issue 14, py-spy of the hung rank). Keeping the destroyed groups while this thread
sleeps, GIL released, lets whoever frees them last find the worker idle.
"""

from __future__ import annotations

import time
from typing import Any

SETTLE_S = 0.2  # gloo's worker gets the GIL back this long before a destroyed group is freed


def settle(kept: list[Any]) -> None:
    """Hold the destroyed groups in ``kept`` for ``SETTLE_S``, then let them go."""
    if kept:
        time.sleep(SETTLE_S)
        kept.clear()
