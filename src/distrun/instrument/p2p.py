"""Point-to-point ops, which torch's Flight Recorder does not show for gloo (docs/instrument.md,
"Point-to-point ops").

Checked with torch 2.13 CPU, gloo: ``send``/``recv``/``isend``/``irecv`` and
``batch_isend_irecv`` make no Flight Recorder entry and leave ``pg_status`` alone (a rank
blocked in ``recv`` looks idle there); they only advance the group's op counter that the next
collective reports. So the agent wraps ``isend`` and ``irecv`` of
``torch.distributed.distributed_c10d``: ``send``, ``recv`` and ``batch_isend_irecv`` call them
through the module, so every p2p op passes there once. The wrapper counts the op per peer and
direction and keeps the last op's ``Work`` per peer, group and tag; once a tick the progress
thread asks each of those whether it completed (``Work.is_completed()``, no wait). Ops on one
channel complete in order, so the last op pending names the channel that is stuck.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from distrun.model.progress import P2POp, P2PProgress

SHOWN = 8  # pending ops written to the progress file
CALLERS = ("send", "recv", "batch_isend_irecv")  # torch's callers of isend/irecv
CACHE_MAX = 1024  # distinct (peer, group, tag) argument forms remembered

Where = tuple[int, str, int]  # peer (global rank, -1: any source), group name, tag
# the last op per (send, where): its number, what was called, shape, dtype, work, when
Last = tuple[int, str, Any, Any, Any, float]


class Recorder:
    """What the wrappers count (on the script's path: a dict update and one tuple per op, no
    growing memory: only the last op per peer, group and tag is kept) and what the progress
    thread makes of it once a tick (which of those last ops are still pending)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[bool, int], int] = {}
        self.groups: dict[str, int] = {}  # p2p ops per process group name
        self.last: dict[tuple[bool, Where], Last] = {}
        self._done: dict[tuple[bool, Where], int] = {}
        self._pending: tuple[P2POp, ...] = ()
        self._signature: tuple[int, tuple[P2POp, ...]] = (0, ())
        self.version = 0  # bumped on every change
        self.changed_at = 0.0

    def poll(self, now: float) -> None:
        """The ops still pending (their work not completed, nor failed); a change bumps
        :attr:`version`."""
        total = sum(self.counts.values())
        pending = []
        for key, (n, op, shape, dtype, work, since) in list(self.last.items()):
            if self._done.get(key) == n:
                continue
            if _completed(work):
                self._done[key] = n
                continue
            (send, (peer, pg, tag)) = key
            pending.append(P2POp(
                op=op, send=send, peer=peer, n=n, pg=pg, tag=tag,
                sizes=tuple(int(d) for d in shape), dtype=str(dtype).removeprefix("torch."),
                since=since))
        pending.sort(key=lambda o: o.since)
        signature = (total, tuple(pending))
        if signature != self._signature:
            self._signature, self._pending = signature, signature[1]
            self.version += 1
            self.changed_at = now

    def snapshot(self) -> P2PProgress | None:
        counts = dict(self.counts)
        if not counts:
            return None
        return P2PProgress(sent={p: c for (s, p), c in counts.items() if s},
                           received={p: c for (s, p), c in counts.items() if not s},
                           pending=self._pending[:SHOWN], changed_at=self.changed_at)


def _completed(work: Any) -> bool:
    try:
        return bool(work.is_completed())
    except RuntimeError:  # a failed op raises here: it is not pending any more
        return True


def wrap(module: ModuleType, recorder: Recorder) -> None:
    """Wrap ``isend`` and ``irecv`` in ``module`` (``torch.distributed.distributed_c10d``) as it
    is imported, before ``torch.distributed`` copies them. Once they were copied (torch was
    imported before the agent started), other modules may hold the originals, which
    ``P2POp``'s check against the module's names would then refuse: nothing is wrapped."""
    outer = sys.modules.get("torch.distributed")
    if outer is not None and hasattr(outer, "isend"):
        return
    for name, send in (("isend", True), ("irecv", False)):
        original = getattr(module, name, None)
        if original is None:
            continue
        # by name, not the module itself: a module reachable from its own function through a
        # closure changed the order of teardown at exit (a forked child then hung in gloo)
        where = functools.partial(_where, module.__name__, send)
        wrapped = _wrapper(original, send, recorder, where)
        setattr(module, name, wrapped)


def _wrapper(original: Callable[..., Any], send: bool, recorder: Recorder,
             where: Callable[[tuple[Any, ...], dict[str, Any]], Where]) -> Callable[..., Any]:
    mine = "isend" if send else "irecv"
    getframe, clock = sys._getframe, time.time
    counts, last, groups = recorder.counts, recorder.last, recorder.groups
    cache: dict[Any, Where] = {}

    @functools.wraps(original)
    def p2p(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        work = original(tensor, *args, **kwargs)
        if work is None:
            return work
        key = (args, tuple(kwargs.items())) if kwargs else args
        try:
            at = cache[key]
        except (KeyError, TypeError):
            at = _resolve(where, args, kwargs)
            if len(cache) < CACHE_MAX:
                with contextlib.suppress(TypeError):
                    cache[key] = at
        n = counts[send, at[0]] = counts.get((send, at[0]), 0) + 1
        groups[at[1]] = groups.get(at[1], 0) + 1
        caller = getframe(1).f_code.co_name
        last[send, at] = (n, caller if caller in CALLERS else mine, tensor.shape, tensor.dtype,
                          work, clock())
        return work

    return p2p


def _resolve(where: Callable[[tuple[Any, ...], dict[str, Any]], Where], args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Where:
    try:
        return where(args, kwargs)
    except Exception:  # never the script's problem: the op is counted for an unknown peer
        return -1, "", 0


def _where(module: str, send: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Where:
    """The peer as a global rank (-1: any source), the group's name, the tag."""
    c10d = sys.modules[module]
    key = "dst" if send else "src"
    peer = args[0] if args else kwargs.get(key)
    group = args[1] if len(args) > 1 else kwargs.get("group")
    tag = args[2] if len(args) > 2 else kwargs.get("tag", 0)
    group_peer = args[3] if len(args) > 3 else kwargs.get(f"group_{key}")
    group = group if group is not None else c10d._get_default_group()
    if peer is None and group_peer is not None:
        peer = c10d.get_global_rank(group, group_peer)
    name = c10d._world.pg_names.get(group, "")
    return (-1 if peer is None else int(peer)), str(name), int(tag or 0)
