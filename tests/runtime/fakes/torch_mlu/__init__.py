"""Stand-in for torch_mlu (see fake_vendor.py): registers a recording torch.mlu."""

from fake_vendor import install

mlu = install("torch_mlu", "mlu", "cncl")
