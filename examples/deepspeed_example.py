"""DeepSpeed under `distrun launch`: ZeRO stage 1 on a tiny model, synthetic data.

    distrun launch --nproc-per-node 2 examples/deepspeed_example.py

distrun.init() first (vendor binding, the process group; deepspeed.init_distributed reuses a
group that exists). DeepSpeed picks its accelerator itself (DS_ACCELERATOR=cpu|cuda|npu|...);
where DeepSpeed cannot run here (its CPU accelerator wants Intel's oneCCL bindings for torch)
the example says so and exits 0 without training.
"""

import sys

import torch
from torch.utils.data import TensorDataset

import distrun


def deepspeed_or_reason():  # type: ignore[no-untyped-def]
    try:
        import deepspeed
        from deepspeed.accelerator import get_accelerator

        get_accelerator()
    except Exception as err:  # DeepSpeed raises many kinds here; the reason is what matters
        return None, f"{type(err).__name__}: {err}"
    return deepspeed, ""


def main() -> int:
    ctx = distrun.init()
    deepspeed, reason = deepspeed_or_reason()
    if deepspeed is None:
        ctx.print(f"deepspeed: skipped: DeepSpeed cannot run on {ctx.device.type} here ({reason})")
        distrun.shutdown()
        return 0
    deepspeed.init_distributed(dist_backend=ctx.backend)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=gen)
    data = TensorDataset(x, x @ torch.randn(8, 1, generator=gen))
    torch.manual_seed(0)
    config = {"train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "SGD", "params": {"lr": 0.05}},
              "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True,
              "steps_per_print": 10_000}
    engine, _, loader, _ = deepspeed.initialize(model=torch.nn.Linear(8, 1), config=config,
                                                training_data=data)
    losses, step = [], 0
    for _epoch in range(4):
        total = torch.zeros(1, device=engine.device)
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(engine(xb.to(engine.device)),
                                                yb.to(engine.device))
            engine.backward(loss)
            engine.step()
            step += 1
            ctx.step(step, loss=loss.item())
            total += loss.detach()
        torch.distributed.all_reduce(total)
        losses.append(total.item() / (ctx.world_size * len(loader)))
    ctx.print(f"deepspeed: {ctx.world_size} ranks on {engine.device.type} ({ctx.backend}): "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    distrun.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
