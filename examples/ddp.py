"""Plain PyTorch DDP, no distrun import: what `distrun launch` runs unchanged.

    distrun launch --nproc-per-node 2 examples/ddp.py

A tiny linear model learns y = x @ w from synthetic data. The device is whatever accelerator
torch has here (torch.accelerator: CUDA, XPU, or a vendor's once its extension is imported),
else the CPU; the backend is torch's default for that device. Rank 0 prints the loss.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    if accelerator is not None:
        torch.accelerator.set_device_index(local_rank)
        device = torch.device(accelerator.type, local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(dist.get_default_backend_for_device(device))
    rank, world = dist.get_rank(), dist.get_world_size()

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    y = x @ torch.randn(8, 1, generator=gen)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=32, sampler=sampler)

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for epoch in range(4):
        sampler.set_epoch(epoch)
        total = torch.zeros(1, device=device)
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb.to(device)), yb.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()
        dist.all_reduce(total)
        losses.append(total.item() / (world * len(loader)))
    if rank == 0:
        print(f"ddp: {world} ranks on {device.type}: loss {losses[0]:.4f} -> {losses[-1]:.4f}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
