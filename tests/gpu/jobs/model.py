"""A model for ``distrun estimate --model tests/gpu/jobs/model.py:build`` (134 M parameters)."""

import torch


def build() -> torch.nn.Module:
    return torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)])
