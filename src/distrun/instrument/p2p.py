"""Point-to-point ops, which torch's Flight Recorder does not show for gloo (docs/instrument.md,
"Point-to-point ops").

Checked with torch 2.13 CPU, gloo: ``send``/``recv``/``isend``/``irecv`` and
``batch_isend_irecv`` make no Flight Recorder entry and leave ``pg_status`` alone (a rank
blocked in ``recv`` looks idle there); they only advance the group's op counter that the next
collective reports. So the agent wraps ``isend`` and ``irecv`` of
``torch.distributed.distributed_c10d``: ``send``, ``recv`` and ``batch_isend_irecv`` call them
through the module, so every p2p op passes there once. The wrapper counts the op per peer and
direction and keeps its ``Work``; the progress thread asks each pending ``Work`` whether it
completed (``Work.is_completed()``, no wait). Cost per op: a few microseconds of Python.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from distrun.model.progress import P2POp, P2PProgress

MAX_PENDING = 256  # ops tracked at once; older ones are let go (never kept alive by us)
SHOWN = 8  # pending ops written to the progress file
CALLERS = ("send", "recv", "batch_isend_irecv")  # torch's callers of isend/irecv


@dataclass
class _Pending:
    op: P2POp
    work: Any


class Recorder:
    """What the wrappers saw (any thread) and what the progress thread reads (under a lock)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._sent: dict[int, int] = {}
        self._received: dict[int, int] = {}
        self._pending: deque[_Pending] = deque()
        self.version = 0  # bumped on every change
        self.changed_at = 0.0

    def entered(self, send: bool, op: str, peer: int, work: Any, info: tuple[str, int, Any]
                ) -> None:
        pg, tag, tensor = info
        now = self._clock()
        with self._lock:
            counts = self._sent if send else self._received
            n = counts[peer] = counts.get(peer, 0) + 1
            if len(self._pending) >= MAX_PENDING:
                self._pending.popleft()
            self._pending.append(_Pending(P2POp(
                op=op, send=send, peer=peer, n=n, pg=pg, tag=int(tag),
                sizes=tuple(int(d) for d in tensor.shape),
                dtype=str(tensor.dtype).removeprefix("torch."), since=now), work))
            self.version += 1
            self.changed_at = now

    def poll(self) -> None:
        """Let go of every pending op whose work completed (or failed)."""
        with self._lock:
            pending = list(self._pending)
        done = [p for p in pending if _completed(p.work)]
        if not done:
            return
        with self._lock:
            gone = {id(p) for p in done}
            self._pending = deque(p for p in self._pending if id(p) not in gone)
            self.version += 1
            self.changed_at = self._clock()

    def snapshot(self) -> P2PProgress | None:
        with self._lock:
            if not self._sent and not self._received:
                return None
            return P2PProgress(sent=dict(self._sent), received=dict(self._received),
                               pending=tuple(p.op for p in list(self._pending)[:SHOWN]),
                               changed_at=self.changed_at)


def _completed(work: Any) -> bool:
    try:
        return bool(work.is_completed())
    except RuntimeError:  # a failed op raises here: it is not pending any more
        return True


def wrap(module: ModuleType, recorder: Recorder, warn: Callable[[str, BaseException], None]
         ) -> None:
    """Wrap ``isend`` and ``irecv`` in ``module`` (``torch.distributed.distributed_c10d``), and
    in ``torch.distributed`` where it already holds the originals."""
    outer = sys.modules.get("torch.distributed")
    for name, send in (("isend", True), ("irecv", False)):
        original = getattr(module, name, None)
        if original is None:
            continue
        wrapped = _wrapper(original, send, module, recorder, warn)
        setattr(module, name, wrapped)
        if outer is not None and getattr(outer, name, None) is original:
            setattr(outer, name, wrapped)


def _wrapper(original: Callable[..., Any], send: bool, c10d: ModuleType, recorder: Recorder,
             warn: Callable[[str, BaseException], None]) -> Callable[..., Any]:
    key = "dst" if send else "src"

    @functools.wraps(original)
    def p2p(tensor: Any, *args: Any, **kwargs: Any) -> Any:
        work = original(tensor, *args, **kwargs)
        if work is not None:
            try:
                caller = sys._getframe(1).f_code.co_name
                op = caller if caller in CALLERS else ("isend" if send else "irecv")
                peer, info = _where(c10d, key, tensor, args, kwargs)
                recorder.entered(send, op, peer, work, info)
            except Exception as exc:  # never the script's problem
                warn("a point-to-point op was not recorded", exc)
        return work

    return p2p


def _where(c10d: ModuleType, key: str, tensor: Any, args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> tuple[int, tuple[str, int, Any]]:
    """The peer as a global rank (-1: any source), the group's name, the tag."""
    peer = args[0] if args else kwargs.get(key)
    group = args[1] if len(args) > 1 else kwargs.get("group")
    tag = args[2] if len(args) > 2 else kwargs.get("tag", 0)
    group_peer = args[3] if len(args) > 3 else kwargs.get(f"group_{key}")
    group = group if group is not None else c10d._get_default_group()
    if peer is None and group_peer is not None:
        peer = c10d.get_global_rank(group, group_peer)
    name = c10d._world.pg_names.get(group, "")
    return (-1 if peer is None else int(peer)), (str(name), int(tag or 0), tensor)
