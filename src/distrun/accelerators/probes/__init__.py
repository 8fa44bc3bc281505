"""One probe per vendor. A probe asks the vendor's management library or tool what devices
exist; it never creates a device context and never writes the environment.

A probe is ``probe(env, run) -> ProbeResult``. ``run`` executes a management tool and
returns its standard output; tests pass a runner that replays recorded real output.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from distrun.accelerators.inventory import Device
from distrun.accelerators.vendors import VendorId


class ToolMissing(Exception):
    """The management tool is not installed (not on PATH)."""


class ToolFailed(Exception):
    """The management tool ran and failed; the message holds its error output."""


Runner = Callable[[Sequence[str]], str]
Status = Literal["found", "absent", "error"]


@dataclass(frozen=True)
class ProbeResult:
    vendor: VendorId
    status: Status
    devices: tuple[Device, ...] = ()
    source: str = ""
    detail: str = ""
    driver: str | None = None


Probe = Callable[[Mapping[str, str], Runner], ProbeResult]

TOOL_TIMEOUT_S = 10.0


def run_tool(argv: Sequence[str]) -> str:
    """Run a management tool with a timeout; its stdout, or ToolMissing / ToolFailed."""
    if shutil.which(argv[0]) is None:
        raise ToolMissing(argv[0])
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolFailed(f"{argv[0]}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise ToolFailed(f"{' '.join(argv)} exited {done.returncode}: {tail[0]}")
    return done.stdout


def absent(vendor: VendorId, why: str) -> ProbeResult:
    return ProbeResult(vendor, "absent", detail=why)


def failed(vendor: VendorId, source: str, why: str) -> ProbeResult:
    return ProbeResult(vendor, "error", source=source, detail=why)


def run_and_parse(vendor: VendorId, argv: Sequence[str], run: Runner,
                  parse: Callable[[str], ProbeResult], missing: str = "") -> ProbeResult:
    """Run a vendor tool and parse its output; a missing tool is absent, a failing one an error."""
    try:
        out = run(argv)
    except ToolMissing:
        return absent(vendor, missing or f"no {argv[0]} on PATH")
    except ToolFailed as exc:
        return failed(vendor, argv[0], str(exc))
    return parse(out)


def parse_mib(text: str) -> int | None:
    """'81559 MiB' / '81559MiB' / '81559' (MiB) -> bytes; None when not a number."""
    digits = text.strip().split()[0].removesuffix("MiB").removesuffix("MB") if text.strip() else ""
    return int(float(digits)) * 2**20 if digits.replace(".", "", 1).isdigit() else None
