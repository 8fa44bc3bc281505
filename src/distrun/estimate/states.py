"""Model states per device: parameters, gradients, optimizer states, by sharding and precision.

Bytes per parameter, one row per way of training (DeepSpeed's accounting for ZeRO, torch's
for DDP with autocast and for FSDP with MixedPrecision); see docs/estimate.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from distrun.errors import UsageError

# Optimizer state in fp32 bytes per parameter (Adafactor: see _adafactor_bytes).
OPTIMIZERS: dict[str, float] = {"sgd": 0.0, "sgd-momentum": 4.0, "adam": 8.0, "adamw": 8.0,
                                "adafactor": 0.0}
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8")
SHARDINGS: tuple[str, ...] = ("ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")
# Adafactor keeps a factored second moment: rows + columns per matrix. Without the shapes we
# assume matrices of this width, i.e. 2 * 4 / width bytes per parameter.
ADAFACTOR_WIDTH = 4096
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e\d+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Setup:
    """What is trained and how. ``largest_layer``: parameters of the largest module (ZeRO-3 /
    FSDP gather one at a time; 0 when unknown); ``adafactor_state``: exact factored-state
    element count when the shapes are known."""

    params: int
    optimizer: str = "adamw"
    precision: str = "bf16"
    sharding: str = "ddp"
    world_size: int = 1
    per_node: int = 1
    largest_layer: int = 0
    adafactor_state: int | None = None


@dataclass(frozen=True)
class ModelStates:
    """Bytes on each device for the model states (no activations)."""

    params: int
    grads: int
    optimizer: int
    working: int
    shard_group: int
    activations: int = 0

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + self.working + self.activations


def parse_count(text: str) -> int:
    """``7B`` -> 7e9, ``350M``, ``1.3e9``, ``125k``; a UsageError otherwise."""
    m = _COUNT.match(text)
    if not m:
        raise UsageError(f"--params {text!r} is not a parameter count",
                         "a number with an optional K/M/B/T suffix", "e.g. --params 7B or 350M")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if value < 1:
        raise UsageError(f"--params {text!r} is less than one parameter", "at least 1",
                         "e.g. --params 7B")
    return int(value)


_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(b|kib|mib|gib|kb|mb|gb)?\s*$", re.IGNORECASE)
_UNIT = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9}


def parse_bytes(text: str, flag: str = "--activation-bytes") -> int:
    """``24MiB``, ``1.5GiB``, ``300000``: bytes; a UsageError otherwise."""
    m = _BYTES.match(text)
    if not m:
        raise UsageError(f"{flag} {text!r} is not a size", "a number with B/KiB/MiB/GiB",
                         f"e.g. {flag} 24MiB")
    return int(float(m.group(1)) * _UNIT[(m.group(2) or "b").lower()])


def _check(setup: Setup) -> None:
    for name, value, known in (("--optimizer", setup.optimizer, tuple(OPTIMIZERS)),
                               ("--precision", setup.precision, PRECISIONS),
                               ("--sharding", setup.sharding, SHARDINGS)):
        if value not in known:
            raise UsageError(f"{name} {value!r} is not known", f"one of {', '.join(known)}",
                             f"pass {name} {known[0]}")
    if setup.world_size < 1 or setup.per_node < 1 or setup.world_size % setup.per_node:
        raise UsageError(f"world size {setup.world_size} with {setup.per_node} per node",
                         "a world size that is a multiple of the devices per node",
                         "pass --inventory NODESxDEVICESxMODEL or --nnodes/--nproc-per-node")


def _optimizer_state(setup: Setup) -> float:
    """fp32 optimizer state, bytes for the whole model."""
    if setup.optimizer != "adafactor":
        return OPTIMIZERS[setup.optimizer] * setup.params
    if setup.adafactor_state is not None:
        return 4.0 * setup.adafactor_state
    return 4.0 * setup.params * 2 / ADAFACTOR_WIDTH


def _rows(setup: Setup) -> tuple[float, float, float]:
    """Whole-model bytes of (params, grads, optimizer incl. fp32 master) before sharding."""
    p = float(setup.params)
    state = _optimizer_state(setup)
    fp8 = p if setup.precision == "fp8" else 0.0
    if setup.precision == "fp32":
        return 4 * p, 4 * p, state
    if setup.sharding == "ddp":  # autocast: fp32 weights + the 16-bit cast cache, fp32 grads
        return 4 * p + 2 * p + fp8, 4 * p, state
    if setup.sharding.startswith("fsdp"):  # MixedPrecision: fp32 sharded params are the master
        return 4 * p + fp8, 4 * p, state
    if setup.sharding == "zero3":  # DeepSpeed: 16-bit params, fp32 grads, fp32 master
        return 2 * p + fp8, 4 * p, 4 * p + state
    return 2 * p + fp8, 2 * p + 4 * p, 4 * p + state  # ZeRO-1/2: 16-bit + fp32 grad partition


def model_states(setup: Setup) -> ModelStates:
    """Per-device bytes of the model states for ``setup`` (see docs/estimate.md)."""
    _check(setup)
    params, grads, optim = _rows(setup)
    n = setup.world_size
    group = setup.per_node if setup.sharding == "fsdp-hybrid" else n
    working = 0
    if setup.sharding == "ddp":
        return ModelStates(_up(params), _up(grads), _up(optim), 0, 1)
    if setup.sharding in ("zero1", "zero2"):
        grads16, grads32 = (2.0 * setup.params, 4.0 * setup.params)
        if setup.precision == "fp32":
            grads16, grads32 = grads, 0.0
        kept = grads16 if setup.sharding == "zero1" else grads16 / n
        return ModelStates(_up(params), _up(kept + grads32 / n), _up(optim / n), 0, n)
    working = 4 * setup.largest_layer  # the gathered layer's 16-bit params and grads
    return ModelStates(_up(params / group), _up(grads / group), _up(optim / group), working,
                       group)


def _up(value: float) -> int:
    return math.ceil(value)
