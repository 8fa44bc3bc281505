"""A small on-disk cache for what diagnose would otherwise rebuild at every start.

Two things are kept: the compiled Hyperscan database and the parsed rule file,
each under a name derived from a hash of what it was built from, so a changed
rule file or pattern set simply misses. Location: ``$DISTRUN_CACHE_DIR``, else
``$XDG_CACHE_HOME/distrun``, else ``~/.cache/distrun``; ``DISTRUN_NO_CACHE=1``
turns it off. A cache that cannot be read or written only costs time, never a
different answer: readers validate what they load.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir(environ: Mapping[str, str]) -> Path | None:
    """Where cached files live (None: caching off or no usable location)."""
    if environ.get("DISTRUN_NO_CACHE"):
        return None
    if environ.get("DISTRUN_CACHE_DIR"):
        return Path(environ["DISTRUN_CACHE_DIR"])
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "distrun"
    home = environ.get("HOME")
    return Path(home) / ".cache" / "distrun" if home else None


def cache_file(name: str, environ: Mapping[str, str] | None = None) -> Path | None:
    folder = cache_dir(os.environ if environ is None else environ)
    return folder / name if folder is not None else None


def read(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return None


def store(path: Path | None, data: bytes) -> None:
    """Write atomically (a private temporary file, then rename); a failure only costs speed."""
    if path is None:
        return
    import tempfile  # only on a cache miss

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except OSError:
        return
