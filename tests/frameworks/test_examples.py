"""Every example in examples/ run for real: `distrun launch --nproc-per-node 2`, CPU, gloo,
each framework as installed from PyPI (requirements-test.txt, torch pinned)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env

pytestmark = pytest.mark.slow
EXAMPLES = REPO / "examples"
STEPS = 32  # 512 samples, 32 per batch and rank, 2 ranks, 4 epochs
# example -> (module it needs, name in its result line, steps its callback / ctx.step reports)
CASES = {
    "ddp": ("torch", "ddp", None),
    "hf_trainer": ("transformers", "hf_trainer", STEPS),
    "lightning_trainer": ("lightning", "lightning_trainer", STEPS),
    "lightning_fabric": ("lightning", "lightning_fabric", STEPS),
    "accelerate_example": ("accelerate", "accelerate", STEPS),
    "mmengine_runner": ("mmengine", "mmengine", STEPS),
    "deepspeed_example": ("deepspeed", "deepspeed", STEPS),
    "jax_example": ("jax", "jax", 40),
}
LOSS = r"{name}: 2 (?:ranks|processes) on (\S+)[^\n]*: loss (\d+\.\d+) -> (\d+\.\d+)"


def launch(example: str, run_dir: Path, marker: str) -> subprocess.CompletedProcess[str]:
    # --stall-timeout: on a loaded 2-core box a framework's interpreter exit (thousands of
    # modules) can take longer than the default 30 s after the last step
    env = cli_env({"DISTRUN_TEST_MARK": marker, "PYTHONPATH": str(REPO / "src"),
                   "JAX_PLATFORMS": "cpu"})
    return subprocess.run(
        [sys.executable, "-m", "distrun.cli.main", "launch", "--nproc-per-node", "2",
         "--stall-timeout", "300", "--run-dir", str(run_dir), str(EXAMPLES / f"{example}.py"),
         marker], cwd=run_dir.parent, env=env, capture_output=True, text=True, timeout=240,
        check=False)


def last_steps(run_dir: Path) -> list[int]:
    beats = sorted((run_dir / "heartbeats").glob("rank-*"))
    return [int(b.read_text().split()[1]) for b in beats]


def events(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", list(CASES))
def test_example_runs_under_distrun_launch(tmp_path: Path, marker: str, example: str) -> None:
    module, name, steps = CASES[example]
    pytest.importorskip(module, reason=f"{module} is in requirements-test.txt")
    run_dir = tmp_path / "run"
    proc = launch(example, run_dir, marker)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "distrun: job succeeded (2 ranks)" in out
    skipped = re.search(rf"^{name}: skipped: (.+)$", proc.stdout, re.M)
    if example == "deepspeed_example" and skipped:  # its CPU path needs what is not here
        assert "DeepSpeed cannot run on cpu here" in skipped.group(0)
        return
    # torch jobs: joined, from the process group itself; JAX: from distrun.init()
    assert "distrun: verify: ok: 2/2 ranks joined" in proc.stderr, proc.stderr[-3000:]
    found = re.search(LOSS.format(name=name), proc.stdout)
    assert found, out[-4000:]
    assert found.group(1).startswith("cpu")
    assert float(found.group(3)) < float(found.group(2)) / 2  # it learned
    if steps is None:  # the plain script reports nothing itself
        return
    assert last_steps(run_dir) == [steps, steps]
    seen = events(run_dir)
    assert sorted(e["rank"] for e in seen if e["event"] == "rank_joined") == [0, 1]
    progress = [e for e in seen if e["event"] == "progress"]
    assert {e["rank"] for e in progress} == {0, 1}
    assert all("loss" in e["metrics"] for e in progress)  # type: ignore[operator]
