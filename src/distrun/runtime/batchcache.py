"""The batch size found last time, keyed by model, device model, world size and precision.

A small JSON file under ``$DISTRUN_CACHE_DIR`` (default ``$XDG_CACHE_HOME/distrun``, else
``~/.cache/distrun``): ``batch-sizes.json``, ``{key: {"size": N, "fails_at": M|null}}``.

``memory-fits.json`` keeps the last measured fit of peak memory against the batch size per
script, device model and world size (``{key: {"intercept", "slope", "sizes", "time"}}``), for
``distrun launch``'s preflight: the planned batch is checked against it before the next start.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

FILE = "batch-sizes.json"
FITS = "memory-fits.json"


def cache_dir(env: Mapping[str, str]) -> str:
    explicit = env.get("DISTRUN_CACHE_DIR")
    if explicit:
        return explicit
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "distrun")


def model_signature(model: Any) -> str:
    """``<parameter count>-<hash of the parameter shapes>`` of a torch module."""
    unique = {id(p): p for p in model.parameters()}
    shapes = sorted(f"{n}:{tuple(p.shape)}:{p.dtype}" for n, p in model.named_parameters())
    total = sum(int(p.numel()) for p in unique.values())
    return f"{total}-{hashlib.sha256('|'.join(shapes).encode()).hexdigest()[:16]}"


def key(signature: str, device_model: str, world_size: int, precision: str) -> str:
    return f"{signature}|{device_model}|{world_size}|{precision}"


def load(env: Mapping[str, str], entry: str) -> int | None:
    data = _read(os.path.join(cache_dir(env), FILE))
    value = data.get(entry)
    size = value.get("size") if isinstance(value, dict) else None
    return size if isinstance(size, int) and size > 0 else None


def store(env: Mapping[str, str], entry: str, size: int, fails_at: int | None) -> None:
    """Write atomically (temporary file, then rename); a cache that cannot be written is skipped."""
    _update(env, FILE, entry, {"size": size, "fails_at": fails_at})


def fit_key(script: str, device_model: str, world_size: int) -> str:
    """The fit's key: the script's real path, the device model, the world size."""
    return f"{os.path.realpath(script)}|{device_model}|{world_size}"


def store_fit(env: Mapping[str, str], entry: str, fit: Mapping[str, Any]) -> None:
    _update(env, FITS, entry, dict(fit))


def load_fit(env: Mapping[str, str], entry: str) -> dict[str, Any] | None:
    """The stored fit, or None (absent, or not the numbers it must hold)."""
    value = _read(os.path.join(cache_dir(env), FITS)).get(entry)
    if not isinstance(value, dict):
        return None
    numbers = [value.get(k) for k in ("intercept", "slope")]
    if not all(isinstance(n, int | float) and abs(n) < 1e18 for n in numbers):
        return None
    return value


def _update(env: Mapping[str, str], name: str, entry: str, value: dict[str, Any]) -> None:
    folder = cache_dir(env)
    path = os.path.join(folder, name)
    try:
        os.makedirs(folder, exist_ok=True)
        data = _read(path)
        data[entry] = value
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        return


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
