"""Stand-in for torch_npu (see fake_vendor.py): registers a recording torch.npu."""

from fake_vendor import install

npu = install("torch_npu", "npu", "hccl")
