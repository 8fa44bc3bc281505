"""Batch arithmetic: presets, per-device batch and gradient accumulation, the environment.

Pure functions over typed values (in the model package because both the launcher and the
runtime inside each rank use them); the launcher passes the result to every rank as environment variables
(``DISTRUN_GLOBAL_BATCH_SIZE``, ``DISTRUN_PER_DEVICE_BATCH_SIZE``, ``DISTRUN_GRAD_ACCUM``,
``DISTRUN_PRESET``, ``DISTRUN_TRAIN_CONFIG``), which ``distrun.init()``'s context reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrun.errors import UsageError

# Fraction of each device's free memory a preset lets the batch use.
PRESETS: dict[str, float] = {"conservative": 0.5, "balanced": 0.7, "aggressive": 0.9}


@dataclass(frozen=True)
class BatchLayout:
    """global = per_device x world_size x grad_accum, exactly."""

    global_batch: int
    per_device: int
    grad_accum: int
    world_size: int


def preset_fraction(name: str) -> float:
    if name not in PRESETS:
        raise UsageError(f"preset {name!r} is not known", f"one of {', '.join(PRESETS)}",
                         "pass --preset balanced (or set preset = \"balanced\" in the config)")
    return PRESETS[name]


def split_global_batch(global_batch: int, world_size: int, max_per_device: int) -> BatchLayout:
    """The fewest accumulation steps whose per-device batch fits ``max_per_device`` and keeps
    the global batch exact; a UsageError naming the nearest exact global sizes otherwise."""
    if global_batch < 1 or world_size < 1 or max_per_device < 1:
        raise UsageError(f"global batch {global_batch}, {world_size} ranks, at most "
                         f"{max_per_device} per device", "positive numbers",
                         "pass --global-batch-size N with N >= the number of ranks")
    if global_batch % world_size:
        lower = global_batch // world_size * world_size
        raise UsageError(f"global batch size {global_batch} does not divide into {world_size} "
                         "ranks", f"a multiple of {world_size}",
                         f"use {lower or world_size} or {lower + world_size}")
    per_rank = global_batch // world_size
    for accum in range(1, per_rank):
        if per_rank % accum == 0 and per_rank // accum <= max_per_device:
            return BatchLayout(global_batch, per_rank // accum, accum, world_size)
    return BatchLayout(global_batch, 1, per_rank, world_size)  # accum = per_rank: always fits


def per_device_limit(free_bytes: int, fraction: float, fixed_bytes: int,
                     bytes_per_sample: float) -> int:
    """The largest per-device batch whose memory (fixed + per-sample x batch) stays within
    ``fraction`` of ``free_bytes``; 0 when even the fixed part does not fit."""
    room = free_bytes * fraction - fixed_bytes
    if room < 0:
        return 0
    return int(room // bytes_per_sample) if bytes_per_sample > 0 else 2**31 - 1


def batch_env(global_batch: int | None, per_device: int | None, world_size: int,
              preset: str | None = None, train_config: str | None = None) -> dict[str, str]:
    """What the ranks are told: only the values known at launch."""
    env: dict[str, str] = {}
    if preset:
        preset_fraction(preset)
        env["DISTRUN_PRESET"] = preset
    if train_config:
        env["DISTRUN_TRAIN_CONFIG"] = train_config
    if global_batch is None:
        if per_device is not None:
            env["DISTRUN_PER_DEVICE_BATCH_SIZE"] = str(per_device)
        return env
    env["DISTRUN_GLOBAL_BATCH_SIZE"] = str(global_batch)
    step = world_size * (per_device or 1)
    if per_device is not None and global_batch % step == 0:
        env["DISTRUN_PER_DEVICE_BATCH_SIZE"] = str(per_device)
        env["DISTRUN_GRAD_ACCUM"] = str(global_batch // step)
    elif per_device is None and not preset and global_batch % world_size == 0:
        env["DISTRUN_PER_DEVICE_BATCH_SIZE"] = str(global_batch // world_size)
        env["DISTRUN_GRAD_ACCUM"] = "1"
    return env
