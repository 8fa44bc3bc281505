"""Advice after an out-of-memory failure: the batch size that fits by the estimate.

:func:`report` turns a ``rank_oom`` record into the sentence ``distrun diagnose`` and the
end of ``distrun launch`` print (docs/estimate.md, "After an out-of-memory error")."""

from __future__ import annotations

from dataclasses import dataclass

from distrun.model.batch import BatchLayout, split_global_batch
from distrun.model.record import RankOom

# of the room the fit leaves above its fixed part (the intercept), the batch may use this much;
# the rest is kept for fragmentation and batches of larger samples
FRACTION = 0.9
MAX_BATCH = 2**31 - 1  # a record with absurd numbers (a tiny slope) gives this, never an error


@dataclass(frozen=True)
class OomReport:
    """What the run record says about one rank's out-of-memory error (``rank_oom``), and the
    batch size that fits by the fit the rank measured (None when nothing was measured)."""

    rank: int
    device: str | None
    peak_bytes: int | None
    capacity_bytes: int | None
    batch_size: int | None
    fitting_batch: int | None
    grad_accum: int | None
    message: str


def size_text(n: float) -> str:
    """Bytes as people read them: ``412 MiB``, ``1.20 GiB``."""
    if abs(n) >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.0f} MiB" if abs(n) >= 2**20 else f"{n / 2**10:.0f} KiB"


def report(event: RankOom, fraction: float = FRACTION) -> OomReport:
    """The verdict's sentence (pure): only what the record holds, never a guess."""
    fitting = _fitting(event, fraction)
    layout = None
    if fitting is not None and fitting >= 1 and event.global_batch and event.world_size \
            and event.global_batch % event.world_size == 0:
        layout = split_global_batch(event.global_batch, event.world_size, fitting)
    parts = [_head(event), *_memory(event), _batch(event),
             _estimate(event, fitting, layout, fraction)]
    return OomReport(event.rank, event.device, event.peak_bytes, event.capacity_bytes,
                     event.batch_size, fitting, layout.grad_accum if layout else None,
                     "; ".join(p for p in parts if p))


def _fitting(event: RankOom, fraction: float) -> int | None:
    fit, cap = event.fit, event.capacity_bytes
    if fit is None or cap is None or fit.slope <= 0:
        return None
    value = (cap - fit.intercept) * fraction // fit.slope
    return max(0, int(min(value, MAX_BATCH)))


def _head(event: RankOom) -> str:
    where = ""
    if event.device:
        where = f" on {event.device}" + (f" ({event.device_name})" if event.device_name else "")
    return f"rank {event.rank} ran out of memory{where}"


def _memory(event: RankOom) -> list[str]:
    out = []
    if event.peak_bytes is not None:
        of = "" if event.capacity_bytes is None else f" of {size_text(event.capacity_bytes)}"
        limit = f"; limit: {event.capacity_source}" if event.capacity_source else ""
        counter = f" ({event.peak_source}{limit})" if event.peak_source else ""
        out.append(f"peak {size_text(event.peak_bytes)}{of}{counter}")
    if event.requested_bytes is not None:
        out.append(f"the failed allocation asked for {size_text(event.requested_bytes)}")
    return out


def _batch(event: RankOom) -> str:
    if event.batch_size is None:
        return "batch size not known to distrun (ctx.batch_size() or --per-device-batch-size)"
    source = f" ({event.batch_source})" if event.batch_source else ""
    return f"at batch {event.batch_size}{source}"


def _estimate(event: RankOom, fitting: int | None, layout: BatchLayout | None,
              fraction: float) -> str:
    found = event.found_batch
    agreed = f"; {found.source} agreed on batch {found.size}" if found else ""
    fit = event.fit
    if fit is None:
        return ("no memory fit was measured on this rank (ctx.estimate_memory or "
                "ctx.find_batch_size measures the batch that fits)" + agreed)
    sizes = ", ".join(str(s) for s in fit.sizes)
    basis = (f"the fit from {fit.source} at batch sizes {sizes}: "
             f"{size_text(fit.intercept)} + {size_text(fit.slope)} per sample")
    if fitting is None:
        return f"the memory limit is not known, so no batch size is estimated ({basis}){agreed}"
    cap = size_text(event.capacity_bytes or 0)
    if fitting < 1:
        return (f"by the estimate not even batch 1 fits under {cap} ({basis}): shard the model "
                f"or free memory{agreed}")
    if event.batch_size is not None and fitting >= event.batch_size:
        return (f"the estimate said batch {event.batch_size} fits, and it did not ({basis}): "
                f"measure again near this batch{agreed}")
    keep = "" if layout is None else (
        f", i.e. batch {layout.per_device} with {layout.grad_accum} gradient-accumulation "
        f"steps for the global batch {layout.global_batch}")
    return (f"by the estimate batch <= {fitting} fits{keep} ({basis}; under {cap} with "
            f"{1 - fraction:.0%} of the room for the batch kept free){agreed}")
