"""Advice after an out-of-memory failure: the batch size that fits by the estimate."""

from __future__ import annotations

from dataclasses import dataclass

from distrun.model.batch import split_global_batch


@dataclass(frozen=True)
class OomAdvice:
    """What the diagnosis says after rank ``rank`` ran out of memory."""

    rank: int
    peak_bytes: int | None
    batch_size: int
    fitting_batch: int
    grad_accum: int | None
    message: str


def oom_advice(rank: int, batch_size: int, device_bytes: int, *, peak_bytes: int | None = None,
               fixed_bytes: int | None = None, global_batch: int | None = None,
               world_size: int = 1, fraction: float = 0.9) -> OomAdvice:
    """The largest batch that fits ``fraction`` of the device by a linear model of memory.

    ``fixed_bytes`` (model states, e.g. from ``distrun estimate``) is the part that does not
    grow with the batch; the rest of the peak (or, without a peak, the whole device) is taken
    as proportional to ``batch_size``. With ``global_batch``, the accumulation steps that keep
    it exact.
    """
    fixed = fixed_bytes or 0
    peak = peak_bytes if peak_bytes is not None else device_bytes
    per_sample = max(peak - fixed, 1) / max(batch_size, 1)
    fits = max(1, min(batch_size - 1, int((device_bytes * fraction - fixed) // per_sample)))
    accum = None
    if global_batch is not None and global_batch % world_size == 0:
        layout = split_global_batch(global_batch, world_size, fits)
        fits, accum = layout.per_device, layout.grad_accum
    seen = "" if peak_bytes is None else f" at a peak of {peak_bytes / 2**30:.2f} GiB"
    keep = "" if accum is None else (f" and {accum} gradient-accumulation steps to keep the global batch "
                                     f"{global_batch}")
    message = (f"rank {rank} ran out of memory{seen} with batch size {batch_size}; "
               f"batch size {fits} fits by the estimate{keep}")
    return OomAdvice(rank, peak_bytes, batch_size, fits, accum, message)
