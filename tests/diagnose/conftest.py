"""Compiled-pattern caches go to a temporary folder, never the user's home."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("distrun-cache")
    before = os.environ.get("DISTRUN_CACHE_DIR")
    os.environ["DISTRUN_CACHE_DIR"] = str(folder)  # subprocesses inherit it
    yield folder
    if before is None:
        os.environ.pop("DISTRUN_CACHE_DIR", None)
    else:
        os.environ["DISTRUN_CACHE_DIR"] = before
