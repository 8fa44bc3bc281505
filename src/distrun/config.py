"""The settings file (``--config FILE`` or DISTRUN_CONFIG): TOML, read safely, as a table.

Keys are the long options of ``distrun launch`` and ``distrun export`` with ``_`` for ``-``
(``nproc_per_node = 8``, ``backend = "gloo"``, ``stall_timeout = 600``, ``force = true``); a
``[train]`` table holds the user's own hyper-parameters for the script (``ctx.train``). Which
keys exist and what each value may be is the command's parser's to say (``distrun.cli.sources``
checks the table against it), so no list of names is kept here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrun.errors import UsageError
from distrun.model.userfile import read_user_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TRAIN = "train"


@dataclass(frozen=True)
class ConfigFile:
    """A settings file as read: ``name`` as the user wrote it (for messages), ``settings`` its
    keys but ``[train]``, ``train_config`` the resolved path when it has a ``[train]`` table."""

    name: str
    settings: dict[str, Any]
    train_config: str | None


def read(path: str, what: str = "config", fix: str = "pass --config the path of a TOML file "
         "of settings") -> ConfigFile:
    """The file's table; a file that cannot be read or is not TOML is one UsageError (``what``
    names it, ``fix`` says what to pass instead)."""
    text = read_user_text(path, what, fix)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{what} {path}: not valid TOML ({exc})",
                         fix="correct the line named, e.g. nproc_per_node = 8") from None
    train = raw.pop(TRAIN, None)
    if train is not None and not isinstance(train, dict):
        raise UsageError(f"{what} {path}: {TRAIN} = {train!r} is not a table",
                         "a [train] table of the script's own settings",
                         f"write them under a [train] line in {path}")
    return ConfigFile(path, raw, None if train is None else str(Path(path).resolve()))
