"""One session helper per vendor management library (NVML, amdsmi).

Probes, the runtime and the monitor all open the library the same way: import it (absent is a
value, not an error), initialise it (a failure is a reason, not an exception), and shut it
down once. Neither library creates a device context.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Importer = Callable[[str], Any]


def import_or_none(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@dataclass(frozen=True)
class LibSpec:
    """How one management library starts and stops, and what it raises."""

    module: str
    init: str
    shutdown: str
    error: str
    label: str
    missing: str


NVML = LibSpec("pynvml", "nvmlInit", "nvmlShutdown", "NVMLError", "NVML",
               "nvidia-ml-py (pynvml) is not importable")
AMDSMI = LibSpec("amdsmi", "amdsmi_init", "amdsmi_shut_down", "AmdSmiException", "amdsmi",
                 "amdsmi is not importable (pip install amdsmi from ROCm)")


@dataclass(frozen=True)
class Session:
    """An initialised library (``lib``), or why there is none (``why``; ``importable`` tells
    a missing library from one that failed to start)."""

    spec: LibSpec
    lib: Any = None
    why: str = ""
    importable: bool = False

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        err = getattr(self.lib, self.spec.error, None)
        return (err,) if isinstance(err, type) and issubclass(err, BaseException) else (Exception,)

    def close(self) -> None:
        if self.lib is None:
            return
        # shutting down a library that is going away: nothing left to report
        with contextlib.suppress(*self.errors):
            getattr(self.lib, self.spec.shutdown)()


def open_session(spec: LibSpec, importer: Importer = import_or_none) -> Session:
    lib = importer(spec.module)
    if lib is None:
        return Session(spec, why=spec.missing)
    probe = Session(spec, lib, importable=True)
    try:
        getattr(lib, spec.init)()
    except probe.errors as exc:
        return Session(spec, why=f"{spec.label}: {exc}", importable=True)
    return probe


@contextmanager
def session(spec: LibSpec, importer: Importer = import_or_none) -> Iterator[Session]:
    opened = open_session(spec, importer)
    try:
        yield opened
    finally:
        opened.close()
