"""Jobs for the real-GPU tests (tests/gpu): ``job.py MODE OUT_JSON``.

bind: distrun.init(), then collectives, a sampler and steps on the bound GPU.
find: the batch finder on the GPU, then a direct bisection of the real limit to compare.
plain_ordinal / plain_dup: plain torch scripts (no distrun) that fail the way users' do:
  set_device(LOCAL_RANK) past the last GPU, and every rank on cuda:0 with nccl.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

MODE, OUT = sys.argv[1], sys.argv[2]
WIDTH = 1 << 20  # 4 MiB of fp32 per sample: memory-heavy, compute-light, so trials are quick


def write(**fields: object) -> None:
    with open(OUT + f".{os.environ.get('RANK', '0')}", "w") as f:
        json.dump(fields, f)


def bind() -> None:
    import distrun

    ctx = distrun.init()
    t = torch.full((4,), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(t)
    seen = list(ctx.sampler(list(range(64)), shuffle=True))
    w = torch.randn(512, 512, device=ctx.device, requires_grad=True)
    opt = torch.optim.SGD([w], lr=1e-3)
    start, step = time.monotonic(), 0
    while step < 200 or time.monotonic() - start < 6:  # long enough to be sampled
        loss = (w @ torch.randn(512, 512, device=ctx.device)).square().mean()
        opt.zero_grad()
        loss.backward()
        for p in [w]:
            dist.all_reduce(p.grad)
        opt.step()
        ctx.step(step, loss=float(loss.detach()))
        step += 1
    write(device=str(ctx.device), backend=ctx.backend, current=torch.cuda.current_device(),
          reduced=t.tolist(), sampled=len(seen), world=ctx.world_size,
          group_backend=dist.get_backend(), steps=step)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(WIDTH, device="cuda"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * self.w
        return (h.sin() * h.cos() + h.exp().tanh()).square().mean()


def find() -> None:
    import distrun
    from distrun.runtime.batchfind import is_oom

    ctx = distrun.init()
    model = Model()

    def step(batch: torch.Tensor) -> None:
        model(batch).backward()
        model.w.grad = None

    def make(n: int) -> torch.Tensor:
        return torch.randn(n, WIDTH, device="cuda")

    def fits(n: int) -> bool:
        try:
            step(make(n))
            return True
        except torch.OutOfMemoryError as err:
            assert is_oom(err)
            return False
        finally:
            torch.cuda.empty_cache()

    found = ctx.find_batch_size(step, make, max=1 << 16)
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    runs = fits(found)
    fit = ctx.estimate_memory(step, make, sizes=(8, 16, 32))
    torch.cuda.reset_peak_memory_stats()
    step(make(64))
    write(found=found, limit=lo, runs_at_found=runs, predicted_64=fit.predict(64),
          measured_64=torch.cuda.max_memory_allocated(), total=torch.cuda.mem_get_info()[1])


def plain_ordinal() -> None:
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)


def plain_dup() -> None:
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    t = torch.ones(1, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()


def mixed() -> None:
    """One group with both backends (torch's default on a CUDA machine): 3 collectives on
    nccl, 2 on gloo; both recorders' status dumps are kept for the replay test."""
    dist.init_process_group("cpu:gloo,cuda:nccl")
    for _ in range(3):
        dist.all_reduce(torch.ones(8, device="cuda"))
    for _ in range(2):
        dist.all_reduce(torch.ones(8))
    torch.cuda.synchronize()
    time.sleep(2.5)  # the agent's tick reads the counters
    c10d = torch._C._distributed_c10d
    with open(OUT + ".nccl.json", "wb") as f:
        f.write(c10d._dump_nccl_trace_json(False, False))
    with open(OUT + ".fr.json", "wb") as f:
        f.write(c10d._dump_fr_trace_json(False, False))
    dist.destroy_process_group()
    write(done=True)


def gloo_only() -> None:
    """A gloo job on a CUDA build: NCCL's recorder exists but holds no group."""
    dist.init_process_group("gloo")
    for _ in range(5):
        dist.all_reduce(torch.ones(8))
    time.sleep(2.5)  # the agent's tick reads the counters
    dist.destroy_process_group()
    write(done=True)


def slow_collective() -> None:
    """An all_reduce queued behind 20 s of GPU work: in flight, seen in NCCL's recorder."""
    import distrun

    ctx = distrun.init()
    t = torch.ones(1024, device=ctx.device)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9 * 20))  # cycles: about 20 s at the H100's ~2 GHz
    dist.all_reduce(t)
    time.sleep(6)  # the agent describes a collective in flight for 2 s; it writes each tick
    progress = os.path.join(os.environ["DISTRUN_RUN_DIR"], "progress", f"rank-{ctx.rank}.json")
    with open(progress) as f:
        seen = json.load(f)["groups"]
    write(value=float(t[0].item()), in_flight=seen)


MODES = {"gloo_only": gloo_only, "mixed": mixed, "slow_collective": slow_collective,
         "bind": bind, "find": find, "plain_ordinal": plain_ordinal, "plain_dup": plain_dup}
MODES[MODE]()
