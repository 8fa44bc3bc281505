"""What distrun launch decided about the batch, read inside each rank from its environment."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from distrun.model.batch import PRESETS, BatchLayout, split_global_batch
from distrun.runtime.errors import InitError

KEYS = ("DISTRUN_GLOBAL_BATCH_SIZE", "DISTRUN_PER_DEVICE_BATCH_SIZE", "DISTRUN_GRAD_ACCUM",
        "DISTRUN_PRESET", "DISTRUN_TRAIN_CONFIG")
__all__ = ["KEYS", "BatchLayout", "split_global_batch"]


def from_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[k] for k in KEYS if env.get(k)}


def _int(env: Mapping[str, str], key: str) -> int | None:
    raw = env.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InitError(f"{key}={raw!r} is not a positive integer", "a batch size >= 1",
                        f"unset {key} or set it to a positive integer")
    return value


def per_device(env: Mapping[str, str]) -> int:
    value = _int(env, "DISTRUN_PER_DEVICE_BATCH_SIZE")
    if value is None:
        raise InitError("no per-device batch size: DISTRUN_PER_DEVICE_BATCH_SIZE is not set",
                        "distrun launch --global-batch-size N (or --per-device-batch-size)",
                        "pass the global batch size: ctx.batch_size(512), or use "
                        "ctx.plan_batch(...) to find it")
    return value


def grad_accum(env: Mapping[str, str]) -> int:
    return _int(env, "DISTRUN_GRAD_ACCUM") or 1


def global_batch(env: Mapping[str, str]) -> int | None:
    return _int(env, "DISTRUN_GLOBAL_BATCH_SIZE")


def fraction(env: Mapping[str, str]) -> float | None:
    name = env.get("DISTRUN_PRESET")
    if not name:
        return None
    if name not in PRESETS:
        raise InitError(f"DISTRUN_PRESET={name!r} is not a preset", f"one of {', '.join(PRESETS)}",
                        "set DISTRUN_PRESET=balanced or unset it")
    return PRESETS[name]


def ceiling(env: Mapping[str, str], total: int | None, world_size: int) -> int:
    """The per-device search's upper bound: the whole per-rank share of the global batch."""
    total = total or global_batch(env)
    return max(1, total // world_size) if total else 4096


def train(env: Mapping[str, str]) -> dict[str, Any]:
    """DISTRUN_TRAIN_CONFIG: a JSON file, or a TOML file whose [train] table is read."""
    path = env.get("DISTRUN_TRAIN_CONFIG")
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if path.endswith(".json"):
            data = json.loads(raw)
        elif sys.version_info >= (3, 11):
            import tomllib

            data = tomllib.loads(raw.decode()).get("train", {})
        else:  # pragma: no cover
            import tomli

            data = tomli.loads(raw.decode()).get("train", {})
    except (OSError, ValueError) as err:
        raise InitError(f"DISTRUN_TRAIN_CONFIG={path!r} cannot be read ({err})",
                        "a JSON file or a TOML file with a [train] table",
                        "fix the file or unset DISTRUN_TRAIN_CONFIG") from None
    if not isinstance(data, dict):
        raise InitError(f"DISTRUN_TRAIN_CONFIG={path!r} holds no table", "a JSON object",
                        "write the hyper-parameters as a JSON object or a [train] table")
    return data

