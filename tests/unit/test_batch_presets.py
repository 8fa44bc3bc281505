"""Presets, per-device batch and accumulation, the [train] table: from the config to the rank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distrun.errors import UsageError
from distrun.model.batch import batch_env, per_device_limit, split_global_batch
from distrun.runtime.context import Context
from distrun.runtime.errors import InitError
from tests.conftest import REPO, run_cli


@pytest.mark.parametrize(("total", "world", "cap", "per", "accum"), [
    (49152, 2, 16, 16, 1536), (96, 2, 48, 48, 1), (96, 2, 7, 6, 8), (24, 4, 100, 6, 1),
    (14, 2, 1, 1, 7)])
def test_split_keeps_the_global_batch_exact(total: int, world: int, cap: int, per: int,
                                            accum: int) -> None:
    layout = split_global_batch(total, world, cap)
    assert (layout.per_device, layout.grad_accum) == (per, accum)
    assert layout.per_device * layout.grad_accum * world == total


def test_split_rejects_an_indivisible_batch() -> None:
    with pytest.raises(UsageError, match="use 96 or 99"):
        split_global_batch(97, 3, 8)


def test_preset_limits() -> None:
    gib = 2**30
    limits = [per_device_limit(80 * gib, f, 20 * gib, gib / 4) for f in (0.5, 0.7, 0.9)]
    assert limits == [80, 144, 208]
    assert per_device_limit(10 * gib, 0.5, 20 * gib, 1.0) == 0


def test_rank_reads_what_launch_decided(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('[train]\ndepth = 16\nmax_seq_len = 2048\n')
    env = batch_env(96, 8, 4, "balanced", str(cfg))
    assert env["DISTRUN_GRAD_ACCUM"] == "3" and env["DISTRUN_PER_DEVICE_BATCH_SIZE"] == "8"
    ctx = Context(0, 0, 4, 0, "cpu", None, "single", batch_env=env)
    assert (ctx.batch_size(), ctx.grad_accum, ctx.batch_size(96)) == (8, 3, 24)
    assert ctx.train == {"depth": 16, "max_seq_len": 2048}
    with pytest.raises(InitError, match="DISTRUN_PER_DEVICE_BATCH_SIZE"):
        Context(0, 0, 4, 0, "cpu", None, "single").batch_size()


def test_plan_passes_preset_batch_and_train_table(tmp_path: Path) -> None:
    cfg = tmp_path / "balanced.toml"
    cfg.write_text('preset = "balanced"\nglobal_batch_size = 96\nper_device_batch_size = 12\n'
                   'nproc_per_node = 2\n\n[train]\ndepth = 16\n')
    res = run_cli(["plan", "--inventory", "1x2xcpu", "--config", str(cfg), "--json", "t.py"],
                  REPO)
    assert res.returncode == 0, res.stderr
    env = json.loads(res.stdout)["env"]
    assert env["DISTRUN_PRESET"] == "balanced"
    assert (env["DISTRUN_GLOBAL_BATCH_SIZE"], env["DISTRUN_PER_DEVICE_BATCH_SIZE"],
            env["DISTRUN_GRAD_ACCUM"]) == ("96", "12", "4")
    assert env["DISTRUN_TRAIN_CONFIG"] == str(cfg.resolve())


def test_bad_preset_in_config_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('preset = "reckless"\n')
    res = run_cli(["plan", "--config", str(cfg), "t.py"], REPO)
    assert res.returncode == 2 and "preset" in res.stderr and "Traceback" not in res.stderr


def test_plan_batch_with_a_preset_on_cpu(tmp_path: Path) -> None:
    import torch

    model = torch.nn.Linear(64, 64)
    env = {"DISTRUN_PRESET": "conservative", "DISTRUN_GLOBAL_BATCH_SIZE": "96"}
    ctx = Context(0, 0, 1, 0, "cpu", None, "single", batch_env=env)

    def step(batch: torch.Tensor) -> None:
        model(batch).sum().backward()

    layout = ctx.plan_batch(step, lambda n: torch.randn(n, 64))
    assert layout.per_device * layout.grad_accum == 96
