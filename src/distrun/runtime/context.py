"""``distrun.init()``: one device-agnostic call that joins the job.

    ctx = distrun.init()
    model = model.to(ctx.device)
    if ctx.is_main: ...
"""

from __future__ import annotations

import datetime
import faulthandler
import os
import signal
import socket
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from distrun import cluster
from distrun.cluster.base import RankFacts
from distrun.runtime import checks, device
from distrun.runtime.errors import InitError
from distrun.runtime.heartbeat import Heartbeat

T = TypeVar("T")
BACKENDS = {"cuda": "nccl", "xpu": "xccl", "npu": "hccl", "gcu": "eccl", "mlu": "cncl"}
DEFAULT_TIMEOUT_S = 600.0
_CURRENT: list[Context] = []


@dataclass(frozen=True)
class Context:
    """Where this process sits in the job, and helpers that respect it."""

    rank: int
    local_rank: int
    world_size: int
    node_rank: int
    device: str
    backend: str | None
    environment: str
    heartbeat: Heartbeat | None = field(default=None, repr=False, compare=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def print(self, *args: Any, all_ranks: bool = False, **kwargs: Any) -> None:
        """print() on the main rank only (every rank with ``all_ranks=True``)."""
        if self.is_main or all_ranks:
            print(*args, **kwargs, flush=True)

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def save(self, obj: Any, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint atomically on the main rank; every rank waits until it exists."""
        if self.is_main:
            import torch

            target = os.fspath(path)
            tmp = f"{target}.tmp-{os.getpid()}"
            torch.save(obj, tmp)
            os.replace(tmp, target)
        self.barrier()

    def sampler(self, dataset: Any, shuffle: bool = True, seed: int = 0) -> Any:
        from torch.utils.data import DistributedSampler

        return DistributedSampler(dataset, num_replicas=self.world_size, rank=self.rank,
                                  shuffle=shuffle, seed=seed)

    def batch_size(self, global_batch_size: int) -> int:
        """The per-process batch size for a global one; an error when it does not divide."""
        if global_batch_size % self.world_size:
            lower = global_batch_size // self.world_size * self.world_size
            raise ValueError(
                f"global batch size {global_batch_size} does not divide into {self.world_size} "
                f"processes; use a multiple of {self.world_size}, e.g. "
                f"{lower or self.world_size} or {lower + self.world_size}")
        return global_batch_size // self.world_size

    def step(self, step: int, **metrics: float) -> None:
        """Report progress and liveness to the launcher; cheap enough for every step."""
        if self.heartbeat is not None:
            self.heartbeat.beat(step, metrics)

    def progress(self, items: Iterable[T], total: int | None = None, desc: str = "") -> Iterator[T]:
        """A progress bar on the main rank; the plain iterable elsewhere."""
        if not self.is_main or not sys.stderr.isatty():
            yield from items
            return
        from rich.progress import track

        yield from track(items, total=total, description=desc)

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        shutdown()


def init(backend: str | None = None, timeout_s: float | None = None, framework: str = "torch",
         env: Mapping[str, str] | None = None) -> Context:
    """Join the job this process was started in, bound to its own device."""
    env = os.environ if env is None else env
    _stack_dump_on_sigusr1()
    facts = cluster.detect(env).facts()
    if framework == "jax":
        from distrun.runtime.jax import init_jax

        return init_jax(facts)
    device_type = device.detect_type(env)
    count = device.device_count(device_type)
    checks.local_rank_fits(facts, device_type, count, env)
    name = device.bind(device_type, facts.local_rank)
    if facts.world_size == 1:
        _warn_idle(count, device_type)
        return _remember(Context(0, 0, 1, 0, name, None, facts.environment,
                                 Heartbeat.from_env(env, 0)))
    chosen = backend or env.get("DISTRUN_BACKEND") or BACKENDS.get(device_type, "gloo")
    checks.backend_available(chosen)
    _init_group(facts, chosen, timeout_s or float(env.get("DISTRUN_PG_TIMEOUT", DEFAULT_TIMEOUT_S)))
    checks.distinct_devices(_gather_bindings(name))
    hb = Heartbeat.from_env(env, facts.rank)
    ctx = Context(facts.rank, facts.local_rank, facts.world_size, facts.node_rank, name, chosen,
                  facts.environment, hb)
    if hb is not None:
        hb.joined(ctx.device, ctx.local_rank, ctx.node_rank)
    return _remember(ctx)


def _stack_dump_on_sigusr1() -> None:
    """distrun's stall detector asks a hung rank for its stack with SIGUSR1 (into its log)."""
    if hasattr(signal, "SIGUSR1") and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def _init_group(facts: RankFacts, backend: str, timeout_s: float) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        return
    init_method = _init_method(facts)
    dist.init_process_group(backend, init_method=init_method, rank=facts.rank,
                            world_size=facts.world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def _init_method(facts: RankFacts) -> str:
    """env:// where the launcher exported MASTER_* (torchrun's agent store is reused then)."""
    if not facts.master_addr or not facts.master_port:
        raise InitError(
            f"{facts.environment}: no master address/port for rank {facts.rank} of "
            f"{facts.world_size} (MASTER_ADDR={facts.master_addr}, MASTER_PORT={facts.master_port})",
            "MASTER_ADDR and MASTER_PORT in every process's environment",
            "export MASTER_ADDR=<host of rank 0> MASTER_PORT=<free port> (with mpirun: "
            "-x MASTER_ADDR -x MASTER_PORT), or start with distrun launch",
        )
    if facts.environment in ("torchelastic", "manual", "kubeflow"):
        return "env://"
    return f"tcp://{facts.master_addr}:{facts.master_port}"


def _gather_bindings(device_name: str) -> list[tuple[str, str]]:
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, (socket.gethostname(), device_name))
    return [tuple(x) for x in out]


def _warn_idle(count: int, device_type: str) -> None:
    if count > 1:
        warnings.warn(f"{count} {device_type} devices visible, 1 process: start with "
                      f"`distrun launch` to use all {count}", stacklevel=3)


def _remember(ctx: Context) -> Context:
    _CURRENT.append(ctx)
    return ctx


def shutdown() -> None:
    """Leave the process group (if any) and close the heartbeat."""
    while _CURRENT:
        ctx = _CURRENT.pop()
        if ctx.heartbeat is not None:
            ctx.heartbeat.close()
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
