"""MMEngine on CPU, CUDA and the non-CUDA vendors (field report 02), and its heartbeat hook.

MMEngine 0.10's ``init_dist(launcher='pytorch')`` calls ``torch.cuda.set_device(local_rank)``
unless it recognises NPU, MLU or MUSA (``mmengine/dist/utils.py``, ``_init_dist_pytorch``):
on a GCU host, or with a CPU build of torch, that is "Found no NVIDIA driver" or
``module 'torch._C' has no attribute '_cuda_setDevice'``. Its ``Runner`` then wraps the model
in ``MMDistributedDataParallel(device_ids=[LOCAL_RANK])``, which DDP refuses for a CPU module
(``runner/runner.py``, ``wrap_model``), and ``get_device()`` knows no ``gcu``
(``device/utils.py``). The one step, before the Runner is built::

    from distrun.integrations import mmengine as dr_mmengine
    ctx = dr_mmengine.setup()                     # distrun.init() + what MMEngine needs
    runner = Runner(model=..., **dr_mmengine.runner_args(ctx), custom_hooks=[DistrunHook()],
                    ...)
    # or, with a config: runner = Runner.from_cfg(dr_mmengine.configure(cfg, ctx))

``setup()`` joins the job with the vendor's own ``set_device`` (``distrun.init()``), so the
Runner finds the process group made and skips ``init_dist`` (``setup_env``: "if
self.distributed and not is_distributed()"); a later direct ``init_dist`` call is a no-op;
``get_device()`` answers this process's device type; collectives of ``mmengine.dist`` use the
device for a backend MMEngine does not know (``eccl``, ``xccl``) instead of the CPU.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, MutableMapping
from typing import Any

import mmengine.device.utils as mm_device
import mmengine.dist as mm_dist
import mmengine.dist.dist as mm_dist_ops
import mmengine.dist.utils as mm_dist_utils
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

import distrun
from distrun.integrations._report import StepReporter
from distrun.runtime.context import Context

LOG = logging.getLogger("distrun.mmengine")
# backends mmengine.dist.get_comm_device maps to a device itself (else it uses the CPU)
MMENGINE_BACKENDS = ("nccl", "hccl", "cncl", "smddp", "mccl", "gloo", "mpi")
# device types whose DDP takes device_ids=[LOCAL_RANK] (MMEngine's default); others: None
INDEXED_DDP = ("cuda",)


def setup(backend: str | None = None, timeout_s: float | None = None) -> Context:
    """``distrun.init()``, then teach MMEngine this process's device; call before the Runner."""
    ctx = distrun.init(backend=backend, timeout_s=timeout_s)
    mm_device.DEVICE = ctx.device.type  # what get_device() answers (it knows no gcu)
    _guard_init_dist()
    if ctx.backend and ctx.backend not in MMENGINE_BACKENDS:
        _comm_on_device(ctx)
    return ctx


def runner_args(ctx: Context) -> dict[str, Any]:
    """``launcher``, ``env_cfg`` and ``cfg`` (with ``model_wrapper_cfg``, which ``Runner``
    reads from its ``cfg``) for ``Runner(...)``; use ``configure`` with a config of your own."""
    args = dict(configure({}, ctx))
    wrapper = args.pop("model_wrapper_cfg", None)
    if wrapper is not None:
        args["cfg"] = {"model_wrapper_cfg": wrapper}
    return args


def configure(cfg: MutableMapping[str, Any], ctx: Context) -> MutableMapping[str, Any]:
    """Set ``launcher``, the ``dist_cfg`` backend and the model wrapper in an MMEngine config.

    ``launcher`` is ``'pytorch'`` when there is a process group, else ``'none'``; a wrapper the
    config names is kept, with ``device_ids=None`` added off CUDA when it sets none.
    """
    import torch.distributed as dist

    grouped = dist.is_available() and dist.is_initialized()
    cfg["launcher"] = "pytorch" if grouped else "none"
    if not grouped:
        return cfg
    env_cfg = cfg.setdefault("env_cfg", {})
    env_cfg.setdefault("dist_cfg", {})["backend"] = ctx.backend
    if ctx.device.type not in INDEXED_DDP:
        wrapper = cfg.get("model_wrapper_cfg") or {"type": "MMDistributedDataParallel"}
        wrapper.setdefault("device_ids", None)
        cfg["model_wrapper_cfg"] = wrapper
    return cfg


def _guard_init_dist() -> None:
    """``init_dist`` with the group made: log and return (its CUDA-only path never runs)."""
    original = mm_dist_utils.init_dist
    if getattr(original, "__distrun_guard__", False):
        return

    @functools.wraps(original)
    def init_dist(launcher: str, *args: Any, **kwargs: Any) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            LOG.info("init_dist(%r): the process group exists (distrun.init()); skipped",
                     launcher)
            return
        original(launcher, *args, **kwargs)

    init_dist.__distrun_guard__ = True  # type: ignore[attr-defined]
    mm_dist_utils.init_dist = init_dist
    mm_dist.init_dist = init_dist


def _comm_on_device(ctx: Context) -> None:
    original: Callable[..., Any] = mm_dist_utils.get_comm_device

    @functools.wraps(original)
    def get_comm_device(group: Any = None) -> Any:
        if mm_dist_utils.get_backend(group) in MMENGINE_BACKENDS:
            return original(group)
        return ctx.device

    mm_dist_utils.get_comm_device = get_comm_device
    mm_dist_ops.get_comm_device = get_comm_device
    mm_dist.get_comm_device = get_comm_device


@HOOKS.register_module(force=True)
class DistrunHook(Hook):  # type: ignore[misc,unused-ignore]
    """Feeds ``ctx.step(iteration, loss=...)`` after every training iteration.

    ``custom_hooks=[DistrunHook()]``, or ``dict(type='DistrunHook')`` in a config once this
    module is imported.
    """

    priority = "VERY_LOW"

    def __init__(self) -> None:
        self._reporter = StepReporter()

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None,
                         outputs: Any = None) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else None
        self._reporter.report(int(runner.iter) + 1, loss=loss)
