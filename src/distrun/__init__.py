"""distrun: distributed training that starts right the first time.

Only the runtime names are exported here, and lazily, so that ``import distrun``
inside a training process stays light (no CLI, no rich, no pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Context", "InitError", "current", "init", "shutdown"]

if TYPE_CHECKING:
    from distrun.runtime.context import Context, current, init, shutdown
    from distrun.runtime.errors import InitError


def __getattr__(name: str) -> Any:
    if name == "InitError":
        from distrun.runtime.errors import InitError

        return InitError
    if name in __all__:
        from distrun.runtime import context

        return getattr(context, name)
    raise AttributeError(f"module 'distrun' has no attribute {name!r}")
