"""Launch settings from a TOML file (``--config FILE`` or DISTRUN_CONFIG).

Keys are the long flag names with ``_`` (``nproc_per_node = 8``, ``backend = "gloo"``,
``max_restarts = 3``). Values become the parser's defaults, so flags on the command line
still win. The file is validated by pydantic: an unknown key or a wrong type is one error
naming the file, the key and the fix.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distrun.errors import UsageError
from distrun.model.userfile import read_user_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class Settings(BaseModel):
    """Every key a config file may hold (all optional)."""

    model_config = ConfigDict(extra="forbid", strict=False)

    nnodes: str | int | None = None
    nproc_per_node: str | int | None = None
    node_rank: int | None = Field(None, ge=0)
    master_addr: str | None = None
    master_port: int | None = Field(None, ge=1, le=65535)
    rdzv_backend: str | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: str | None = None
    max_restarts: int | None = Field(None, ge=0)
    monitor_interval: float | None = Field(None, gt=0)
    local_addr: str | None = None
    inventory: str | None = None
    backend: str | None = None
    global_batch_size: int | None = Field(None, ge=1)
    per_device_batch_size: int | None = Field(None, ge=1)
    run_dir: str | None = None
    preset: Literal["conservative", "balanced", "aggressive"] | None = None
    train: dict[str, Any] | None = None  # the user's own hyper-parameters, passed to the script


def load(path: str) -> dict[str, Any]:
    """The settings in ``path`` as parser defaults (strings where torchrun expects strings)."""
    text = read_user_text(path, "config", "pass --config the path of a TOML file of settings")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config {path}: not valid TOML ({exc})",
                         fix="correct the line named, e.g. nproc_per_node = 8") from None
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        problem, key = _first_problem(exc)
        fix = (f"keys allowed: {', '.join(Settings.model_fields)}" if "not a setting" in problem
               else f"correct the value of {key} in {path}")
        raise UsageError(f"config {path}: {problem}", fix=fix) from None
    values = settings.model_dump(exclude_none=True)
    if values.pop("train", None) is not None:  # the ranks read it: DISTRUN_TRAIN_CONFIG
        values["train_config"] = str(Path(path).resolve())
    return {k: str(v) if k in ("nnodes", "nproc_per_node") else v for k, v in values.items()}


def _first_problem(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"][:1]) or "?"
    if err["type"] == "extra_forbidden":
        return f"key {key!r} is not a setting", key
    return f"{key} = {err.get('input')!r}: {err['msg']}", key
