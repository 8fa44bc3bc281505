"""Stand-ins for vendor torch extensions this machine lacks; every call is recorded.

Each registers its device the way the real extension does (torch_npu, torch_gcu and torch_mlu
all call ``torch.utils.rename_privateuse1_backend(<type>)`` and
``torch._register_device_module(<type>, <ext>.<type>)``; torch_gcu also sets
``torch.distributed.is_eccl_available``). Calls go to $FAKE_VENDOR_LOG as JSON lines
``[rank, call, args]``; $FAKE_DEVICE_COUNT is the device count (default 8);
$FAKE_BACKEND=1 makes the vendor's backend report itself available.
"""

from __future__ import annotations

import json
import os
import types
from typing import Any

import torch
import torch.distributed


def record(call: str, *args: Any) -> None:
    log = os.environ.get("FAKE_VENDOR_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps([os.environ.get("RANK", "0"), call, list(args)]) + "\n")


class Namespace(types.ModuleType):
    """``torch.<type>``: the functions distrun may call; any other attribute is recorded."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        record(f"{self.__name__}.<missing {name}>")
        raise AttributeError(name)


def install(extension: str, device_type: str, backend: str) -> types.ModuleType:
    ns = Namespace(f"torch.{device_type}")

    def device_count() -> int:
        record(f"torch.{device_type}.device_count")
        return int(os.environ.get("FAKE_DEVICE_COUNT", "8"))

    def set_device(index: int) -> None:
        record(f"torch.{device_type}.set_device", index)

    def is_available() -> bool:
        record(f"torch.{device_type}.is_available")
        return True

    ns.device_count = device_count  # type: ignore[attr-defined]
    ns.set_device = set_device  # type: ignore[attr-defined]
    ns.is_available = is_available  # type: ignore[attr-defined]
    torch.utils.rename_privateuse1_backend(device_type)
    torch._register_device_module(device_type, ns)
    setattr(torch.distributed, f"is_{backend}_available",
            lambda: os.environ.get("FAKE_BACKEND") == "1")
    record(f"import {extension}")
    return ns
