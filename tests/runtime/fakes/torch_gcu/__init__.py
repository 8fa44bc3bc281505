"""Stand-in for torch_gcu (see fake_vendor.py): registers a recording torch.gcu."""

from fake_vendor import install

gcu = install("torch_gcu", "gcu", "eccl")
