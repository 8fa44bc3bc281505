"""Memory estimates before launch: model states per device, fit per device, batch arithmetic.

Pure arithmetic over typed inputs (see docs/estimate.md for the formulas and how they compare
with DeepSpeed's and accelerate's estimators).
"""

from distrun.estimate.states import (
    OPTIMIZERS,
    PRECISIONS,
    SHARDINGS,
    ModelStates,
    Setup,
    model_states,
    parse_count,
)

__all__ = ["OPTIMIZERS", "PRECISIONS", "SHARDINGS", "ModelStates", "Setup", "model_states",
           "parse_count"]
