"""How light ``import distrun`` is inside a training process, against ``import torch.distributed``.

Each import runs in a fresh interpreter under ``python -X importtime``; the number is the
cumulative time of the top-level module, best of 5. Also checks what ``import distrun`` and
the runtime module that ``init()`` loads pull in: no torch, rich, pydantic or CLI.

    PYTHONPATH=src python benchmarks/runtime_import.py
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "rich", "pydantic", "distrun.cli", "jax")


def import_us(statement: str, top: str) -> int:
    """Cumulative µs of ``top`` when running ``statement`` in a fresh interpreter (best of 5)."""
    best = None
    for _ in range(5):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", statement],
                              capture_output=True, text=True, check=True)
        for line in proc.stderr.splitlines():
            parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
            if len(parts) == 3 and parts[2] == top:
                us = int(parts[1])
        best = us if best is None else min(best, us)
    assert best is not None
    return best


def loaded(statement: str) -> list[str]:
    code = f"{statement}; import sys; print(' '.join(sorted(sys.modules)))"
    mods = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split()
    return [m for m in HEAVY if m in mods]


def main() -> int:
    ours = import_us("import distrun", "distrun")
    runtime = import_us("import distrun.runtime.context", "distrun.runtime.context")
    torch_dist = import_us("import torch.distributed", "torch")
    print(f"import distrun:                  {ours / 1000:8.2f} ms")
    print(f"import distrun.runtime.context:  {runtime / 1000:8.2f} ms  (what init() adds "
          "before torch)")
    print(f"import torch.distributed:        {torch_dist / 1000:8.2f} ms")
    print(f"ratio distrun / torch.distributed:         {ours / torch_dist:.4f}")
    print(f"ratio runtime.context / torch.distributed: {runtime / torch_dist:.4f}")
    heavy = loaded("import distrun") + loaded("import distrun.runtime.context")
    print(f"heavy modules pulled in: {heavy or 'none'}")
    return 1 if heavy else 0


if __name__ == "__main__":
    sys.exit(main())
