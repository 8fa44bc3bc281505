"""Parameters of a model given as a Python file or module exposing a factory.

``path/to/model.py[:factory]`` or ``package.module[:factory]``; the factory (default
``make_model`` or ``build_model``) is called on torch's meta device, so nothing is allocated.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from distrun.errors import UsageError

FACTORIES = ("make_model", "build_model")


@dataclass(frozen=True)
class ModelCount:
    params: int
    largest_layer: int
    adafactor_state: int
    signature: str


def count(spec: str) -> ModelCount:
    """Build the model on the meta device and count its (shared-once) parameters."""
    factory = _factory(spec)
    try:
        import torch
    except ImportError:
        raise UsageError(f"--model {spec!r} needs torch to build the model", "torch installed",
                         "pip install torch, or pass --params COUNT") from None
    try:
        with torch.device("meta"):
            model = factory() if callable(factory) and not isinstance(factory, torch.nn.Module) \
                else factory
    except Exception as err:  # the user's code: its error, in one line, is the answer
        raise UsageError(f"--model {spec!r}: building it failed: {type(err).__name__}: {err}",
                         "a factory that builds the model with no arguments",
                         "fix the factory, or pass --params COUNT") from None
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"--model {spec!r} returned {type(model).__name__}", "a torch.nn.Module",
                         "make the factory return the model")
    return measure(model)


def measure(model: Any) -> ModelCount:
    """Counts of a torch module: parameters once each, the largest module, Adafactor state."""
    unique = {id(p): p for p in model.parameters()}
    shapes = sorted(str(tuple(p.shape)) for p in unique.values())
    largest = max((sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules()),
                  default=0)
    factored = sum(p.shape[-2] + p.shape[-1] if p.dim() >= 2 else p.numel()
                   for p in unique.values())
    digest = hashlib.sha256("|".join(shapes).encode()).hexdigest()[:16]
    total = sum(p.numel() for p in unique.values())
    return ModelCount(int(total), int(largest), int(factored), f"{total}-{digest}")


def _factory(spec: str) -> Any:
    target, _, name = spec.partition(":")
    module = _load(spec, target)
    names = (name,) if name else FACTORIES
    for candidate in names:
        if hasattr(module, candidate):
            return getattr(module, candidate)
    raise UsageError(f"--model {spec!r} has no {' or '.join(names)}",
                     "a function that returns the model (built with no arguments)",
                     f"name it with --model {target}:FUNCTION")


def _load(spec: str, target: str) -> Any:
    if os.path.isdir(target) and not os.path.isfile(os.path.join(target, "__init__.py")):
        raise UsageError(f"--model {spec!r}: {target} is a directory",
                         "FILE.py[:FACTORY] or MODULE[:FACTORY]",
                         f"pass the Python file that builds the model, e.g. --model "
                         f"{os.path.join(target, 'model.py')}:make_model")
    try:
        if target.endswith(".py") or os.sep in target:
            if not os.path.isfile(target):
                raise UsageError(f"--model {spec!r}: no file {target}", "a Python file",
                                 "check the path")
            loaded = importlib.util.spec_from_file_location("_distrun_model", target)
            if loaded is None or loaded.loader is None:
                raise UsageError(f"--model {spec!r} cannot be loaded", "a Python file",
                                 "check the path")
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except UsageError:
        raise
    except (ImportError, SyntaxError) as err:
        raise UsageError(f"--model {spec!r}: {err}", "an importable module",
                         "check the module name and PYTHONPATH") from None
    except (Exception, SystemExit) as err:  # the module's own code ran at import and failed
        raise UsageError(f"--model {spec!r}: importing it failed: {type(err).__name__}: {err}",
                         "a module that defines the model factory without running a job",
                         "keep the training under if __name__ == '__main__', or pass "
                         "--params COUNT") from None
