"""``distrun.init()``: one device-agnostic call that joins the job.

    ctx = distrun.init()
    model = model.to(ctx.device)
    if ctx.is_main: ...

Nothing heavy is imported before ``init()`` runs: torch (or jax) is imported inside it.
"""

from __future__ import annotations

import atexit
import datetime
import faulthandler
import logging
import os
import pickle
import signal
import socket
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from distrun import cluster
from distrun.cluster import slurm
from distrun.cluster.base import RankFacts
from distrun.model import oom
from distrun.model.teardown import settle
from distrun.runtime import batchsettings, checks, device, logs, memory
from distrun.runtime.errors import InitError
from distrun.runtime.heartbeat import Heartbeat

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 600.0
FRAMEWORKS = ("torch", "jax")
_CURRENT: list[Context] = []
_OWNS_GROUP: list[bool] = []


@dataclass(frozen=True)
class Context:
    """Where this process sits in the job, and helpers that respect it."""

    rank: int
    local_rank: int
    world_size: int
    node_rank: int
    device: Any  # torch.device ("cuda:1", "cpu"); a jax.Device under framework="jax"
    backend: str | None
    environment: str
    framework: str = "torch"
    log_path: str | None = field(default=None, repr=False)
    heartbeat: Heartbeat | None = field(default=None, repr=False, compare=False)
    batch_env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device_name(self) -> str:
        """The device as text, as events and logs show it: ``cuda:1``, ``gcu:0``, ``cpu``."""
        if self.framework == "jax":
            from distrun.runtime import jax as jax_runtime

            return jax_runtime.device_name(self.device)
        return str(self.device)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def logger(self) -> logging.Logger:
        """A logger: the main rank's records to stderr, other ranks' to their own log."""
        return logs.rank_logger(self.rank, self.log_path)

    def print(self, *args: Any, all_ranks: bool = False, **kwargs: Any) -> None:
        """print() on the main rank only (every rank with ``all_ranks=True``)."""
        if self.is_main or all_ranks:
            print(*args, **kwargs, flush=True)

    def barrier(self) -> None:
        if not self.distributed:
            return
        if self.framework == "jax":
            from distrun.runtime import jax as jax_runtime

            jax_runtime.barrier("distrun.barrier")
            return
        import torch.distributed as dist

        dist.barrier()

    def save(self, obj: Any, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint atomically on the main rank; every rank waits until it exists.

        torch.save for torch, pickle for jax; written to a temporary file in the same folder,
        flushed to disk, then renamed over ``path``, so a reader never sees half a file.
        """
        if self.is_main:
            _write_atomically(obj, os.fspath(path), self.framework)
        self.barrier()

    def sampler(self, dataset: Any, shuffle: bool = True, seed: int = 0,
                drop_last: bool = False) -> Any:
        """A DistributedSampler for this rank (call ``set_epoch`` on it every epoch)."""
        from torch.utils.data import DistributedSampler

        return DistributedSampler(dataset, num_replicas=self.world_size, rank=self.rank,
                                  shuffle=shuffle, seed=seed, drop_last=drop_last)

    def batch_size(self, global_batch_size: int | None = None) -> int:
        """The per-process batch size for a global one; an error when it does not divide.

        With no argument: the per-device batch size distrun launch decided
        (DISTRUN_PER_DEVICE_BATCH_SIZE, from --global-batch-size / --per-device-batch-size).
        """
        if global_batch_size is None:
            size = batchsettings.per_device(self.batch_env)
            oom.note_batch(size, "ctx.batch_size(), from distrun launch")
            return size
        if global_batch_size < 1 or global_batch_size % self.world_size:
            lower = global_batch_size // self.world_size * self.world_size
            raise ValueError(
                f"global batch size {global_batch_size} does not divide into {self.world_size} "
                f"processes; use a multiple of {self.world_size}, e.g. "
                f"{lower or self.world_size} or {max(lower, 0) + self.world_size}")
        oom.note_batch(global_batch_size // self.world_size, "ctx.batch_size()")
        return global_batch_size // self.world_size

    @property
    def grad_accum(self) -> int:
        """Gradient-accumulation steps that keep the global batch exact (DISTRUN_GRAD_ACCUM)."""
        return batchsettings.grad_accum(self.batch_env)

    @property
    def train(self) -> dict[str, Any]:
        """The user's hyper-parameters: the [train] table of the --config file."""
        return batchsettings.train(self.batch_env)

    def plan_batch(self, step_fn: memory.StepFn, make_batch: memory.MakeBatch,
                   global_batch_size: int | None = None, *, model: Any = None,
                   precision: str = "fp32") -> batchsettings.BatchLayout:
        """Per-device batch and accumulation steps for the global batch (argument, else
        DISTRUN_GLOBAL_BATCH_SIZE) within the preset's share of free memory (DISTRUN_PRESET:
        conservative 50 %, balanced 70 %, aggressive 90 %), found by real trials on all ranks."""
        from distrun.runtime import batchfind

        fraction = batchsettings.fraction(self.batch_env)
        found = batchfind.find(self.device_name, self.world_size, step_fn, make_batch,
                               maximum=batchsettings.ceiling(self.batch_env, global_batch_size,
                                                             self.world_size),
                               model=model, precision=precision, rank=self.rank,
                               fraction=fraction)
        total = global_batch_size or batchsettings.global_batch(self.batch_env)
        if total is None:
            layout = batchsettings.BatchLayout(found.size * self.world_size, found.size, 1,
                                               self.world_size)
        else:
            layout = batchsettings.split_global_batch(total, self.world_size, found.size)
        oom.note_batch(layout.per_device, "ctx.plan_batch")
        return layout

    def estimate_memory(self, step_fn: memory.StepFn, make_batch: memory.MakeBatch,
                        sizes: tuple[int, ...] = (2, 4, 8)) -> memory.MemoryFit:
        """Run the real step at a few batch sizes on this device; fit peak memory vs batch."""
        from distrun.runtime import batchfind

        fit = memory.estimate(self.device_name, step_fn, make_batch, sizes)
        batchfind.remember_fit(fit, "ctx.estimate_memory", self.world_size, rank=self.rank)
        return fit

    def find_batch_size(self, step_fn: memory.StepFn, make_batch: memory.MakeBatch,
                        *, start: int = 1, max: int = 4096,
                        model: Any = None, precision: str = "fp32") -> int:
        """The largest batch size that runs on every rank (all ranks get the same answer).

        Real trials of ``step_fn(make_batch(size))``, out-of-memory as "no", agreed by
        all_reduce MIN, at most 8 trials, within 10 % of the largest size that fits on the
        smallest device; cached by ``model``'s signature, device model, world size, precision.
        """
        from distrun.runtime import batchfind

        return batchfind.find(self.device_name, self.world_size, step_fn, make_batch, start=start,
                              maximum=max, model=model, precision=precision, rank=self.rank).size

    def step(self, step: int, **metrics: float) -> None:
        """Report progress and liveness to the launcher; cheap enough for every step."""
        if self.heartbeat is not None:
            self.heartbeat.beat(step, metrics)

    def progress(self, items: Iterable[T], total: int | None = None, desc: str = "") -> Iterator[T]:
        """A progress bar on the main rank (on a terminal); the plain iterable elsewhere."""
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
    """Join the job this process was started in, bound to its own device.

    ``backend``: the collective backend (default: DISTRUN_BACKEND, else the vendor's);
    ``timeout_s``: the process-group timeout (default: DISTRUN_PG_TIMEOUT, else 600 s);
    ``framework``: "torch" or "jax"; ``env``: the environment to read (default os.environ).
    A second call returns the context of the first.
    """
    if _CURRENT:
        return _CURRENT[-1]
    env = os.environ if env is None else env
    _stack_dump_on_sigusr1()
    if framework not in FRAMEWORKS:
        raise InitError(f"framework {framework!r} is not supported",
                        f"one of {', '.join(FRAMEWORKS)}", "pass framework='torch' or 'jax'")
    facts = slurm.reachable_master(cluster.detect(env).facts(), env)
    timeout = _timeout(timeout_s, env)
    if framework == "jax":
        return _init_jax(facts, env, timeout)
    return _init_torch(facts, env, backend or env.get("DISTRUN_BACKEND") or None, timeout)


def _init_torch(facts: RankFacts, env: Mapping[str, str], backend: str | None,
                timeout_s: float) -> Context:
    """Bind the device; under a launcher, join the process group (one process too: a script
    that wraps its model in DDP needs the group whatever the world size, as under torchrun)."""
    device_type = device.detect_type(env)
    count = device.device_count(device_type, env)
    checks.local_rank_fits(facts, device_type, count, env)
    launched = facts.environment != "single"
    chosen = _backend(device_type, backend, facts.world_size) if launched or backend else None
    bound = device.bind(device_type, facts.local_rank)
    if not launched:
        _warn_idle(count, device_type)
        return _start(facts, bound, chosen, env, "torch")
    _init_group(facts, chosen or "gloo", timeout_s)
    if facts.world_size > 1 and device_type not in device.UNBOUND:
        _check_bindings(facts, bound)
    return _start(facts, bound, chosen, env, "torch")


def _backend(device_type: str, requested: str | None, world_size: int) -> str:
    """The backend to use: checked when asked for or when several processes need it; for one
    process the vendor's when this build has it, else gloo (a group of one sends nothing)."""
    if requested or world_size > 1:
        return device.choose_backend(device_type, requested)
    return device.first_available(device_type)


def _init_jax(facts: RankFacts, env: Mapping[str, str], timeout_s: float) -> Context:
    from distrun.runtime import jax as jax_runtime

    nvidia = device._nvml_count()
    device_type = env.get("DISTRUN_DEVICE_TYPE") or ("cuda" if nvidia > 0 else "cpu")
    advice = jax_runtime.memory_advice(facts, env, device_type, nvidia)
    if advice:
        warnings.warn(advice, stacklevel=3)
    name = jax_runtime.initialize(facts, env, device_type, timeout_s)
    return _start(facts, name, "jax", env, "jax")


def _start(facts: RankFacts, name: Any, backend: str | None, env: Mapping[str, str],
           framework: str) -> Context:
    hb = Heartbeat.from_env(env, facts.rank)
    ctx = Context(facts.rank, facts.local_rank, facts.world_size, facts.node_rank, name,
                  backend, facts.environment, framework, logs.log_path(facts.rank, env), hb,
                  batchsettings.from_env(env))
    if hb is not None:
        hb.joined(ctx.device_name, ctx.local_rank, ctx.node_rank)
    _CURRENT.append(ctx)
    return ctx


def _timeout(timeout_s: float | None, env: Mapping[str, str]) -> float:
    if timeout_s is not None:
        if not 0 < float(timeout_s) < float("inf"):
            raise InitError(f"timeout_s={timeout_s!r} is not a positive number of seconds",
                            "seconds, e.g. 600", "pass timeout_s=600 or leave it out")
        return float(timeout_s)
    raw = env.get("DISTRUN_PG_TIMEOUT")
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise InitError(f"DISTRUN_PG_TIMEOUT={raw[:40]!r} is not a positive number of seconds",
                        "seconds, e.g. 600", "set DISTRUN_PG_TIMEOUT=600 or unset it")
    return value


def _stack_dump_on_sigusr1() -> None:
    """distrun's stall detector asks a hung rank for its stack with SIGUSR1 (into its log)."""
    if hasattr(signal, "SIGUSR1") and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        faulthandler.register(signal.SIGUSR1, all_threads=True)


def _init_group(facts: RankFacts, backend: str, timeout_s: float) -> None:
    import torch.distributed as dist

    if dist.is_initialized():  # a framework made it already: use it, leave it to the framework
        return
    timeout = datetime.timedelta(seconds=timeout_s)
    if facts.world_size == 1 and not (facts.master_addr and facts.master_port):
        # one process with no rendezvous address (e.g. WORLD_SIZE=1 set by hand): an
        # in-memory store, nothing to reach
        dist.init_process_group(backend, store=dist.HashStore(),  # type: ignore[attr-defined]
                                rank=0, world_size=1,
                                timeout=timeout)
    else:
        dist.init_process_group(backend, init_method=init_method(facts), rank=facts.rank,
                                world_size=facts.world_size, timeout=timeout)
    _OWNS_GROUP.append(True)
    # A group left to the interpreter's teardown can abort the finished process ("terminate
    # called without an active exception", exit 134): tear down what distrun made at exit.
    atexit.register(shutdown)


def init_method(facts: RankFacts) -> str:
    """tcp://MASTER_ADDR:MASTER_PORT from the launcher's facts (not re-read from os.environ).

    Under torchrun torch reuses its agent's store (TORCHELASTIC_USE_AGENT_STORE) for tcp://
    as for env://, so rank 0 does not try to listen on the agent's port.
    """
    if not facts.master_addr or not facts.master_port:
        raise InitError(
            f"{facts.environment}: no master address/port for rank {facts.rank} of "
            f"{facts.world_size} (MASTER_ADDR={facts.master_addr}, "
            f"MASTER_PORT={facts.master_port})",
            "MASTER_ADDR and MASTER_PORT in every process's environment",
            "export MASTER_ADDR=<host of rank 0> MASTER_PORT=<free port> (with mpirun: "
            "-x MASTER_ADDR -x MASTER_PORT), or start with distrun launch",
        )
    host = f"[{facts.master_addr}]" if ":" in facts.master_addr else facts.master_addr
    return f"tcp://{host}:{facts.master_port}"


def _check_bindings(facts: RankFacts, bound: Any) -> None:
    """Two ranks of one host on one device: found through the store, before any collective.

    Each rank claims ``<host>/<device>`` with compare_set; the second claimant records the
    conflict; all ranks wait until every rank has claimed, then all raise the same error.
    """
    import torch.distributed as dist

    store = dist.distributed_c10d._get_default_store()
    host, name = socket.gethostname(), str(bound)
    owner = store.compare_set(f"distrun/device/{host}/{name}", "", str(facts.rank)).decode()
    if owner != str(facts.rank):
        store.set("distrun/device-conflict", f"{owner}\t{facts.rank}\t{host}\t{name}")
    if store.add("distrun/device-claims", 1) == facts.world_size:
        store.set("distrun/device-claims-done", "1")
    store.wait(["distrun/device-claims-done"])
    if store.check(["distrun/device-conflict"]):
        first, second, on_host, dev = store.get("distrun/device-conflict").decode().split("\t")
        low, high = sorted((int(first), int(second)))
        raise checks.shared_device(low, high, on_host, dev)


def _warn_idle(count: int, device_type: str) -> None:
    if count > 1:
        warnings.warn(f"{count} devices visible ({device_type}), 1 process: start with "
                      f"`distrun launch` to use all {count}", stacklevel=4)


def _write_atomically(obj: Any, target: str, framework: str) -> None:
    folder = os.path.dirname(os.path.abspath(target))
    tmp = os.path.join(folder, f".{os.path.basename(target)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            if framework == "torch":
                import torch

                torch.save(obj, fh)
            else:
                pickle.dump(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def current() -> Context | None:
    """The context of this process's init(), or None before it."""
    return _CURRENT[-1] if _CURRENT else None


def shutdown() -> None:
    """Leave the job: the process group distrun made (if any), JAX's client, the heartbeat."""
    framework = _CURRENT[-1].framework if _CURRENT else "torch"
    while _CURRENT:
        ctx = _CURRENT.pop()
        if ctx.heartbeat is not None:
            ctx.heartbeat.close()
    if framework == "jax":
        from distrun.runtime import jax as jax_runtime

        jax_runtime.shutdown()
        return
    if not _OWNS_GROUP or "torch" not in sys.modules:
        return
    _OWNS_GROUP.clear()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        kept: list[object] = [dist.group.WORLD] if "gloo" in str(dist.get_backend()) else []
        dist.destroy_process_group()
        settle(kept)  # the torch 2.13 gloo teardown deadlock (model/teardown.py)


