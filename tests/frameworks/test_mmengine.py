"""Field report 02 for real: MMEngine's CUDA-only init_dist, and the one step that replaces it
(distrun.integrations.mmengine.setup), on this CPU build and with the GCU / NPU stand-ins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.helpers import calls, fake_path, free_port, worker_env

pytest.importorskip("mmengine", reason="mmengine is in requirements-test.txt")
pytestmark = pytest.mark.slow

REPORT_02 = """\
from mmengine.dist import init_dist
init_dist('pytorch', backend='gloo')   # what report 02's script did
"""
NO_DRIVER = """\
import torch
def set_device(index):  # what a CUDA build says on a host with no NVIDIA driver
    raise RuntimeError("Found no NVIDIA driver on your system.")
torch.cuda.set_device = set_device
"""
STEP = """\
import json, sys, torch
from distrun.integrations import mmengine as dr
ctx = dr.setup()
from mmengine.device import get_device
from mmengine.dist import all_reduce, get_dist_info, init_dist
init_dist('pytorch', backend='nccl')  # the script's own call: now a no-op
t = torch.tensor([float(ctx.rank + 1)])
all_reduce(t, op='sum')
cfg = dr.configure({'env_cfg': {'cudnn_benchmark': False}}, ctx)
print(json.dumps({'device': get_device(), 'dist': list(get_dist_info()), 'sum': t.item(),
                  'cfg': cfg, 'ctx_device': str(ctx.device)}))
"""


def run_ranks(script: str, envs: list[dict[str, str]], cwd: Path) -> list[subprocess.
                                                                          CompletedProcess[str]]:
    path = cwd / "script.py"
    path.write_text(script)
    procs = [subprocess.Popen([sys.executable, str(path)], env=env, cwd=cwd, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for env in envs]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=180)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


def rank_envs(marker: str, world: int, extra: dict[str, str], path: str = ""
              ) -> list[dict[str, str]]:
    port = str(free_port())
    return [worker_env(marker, {"RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(r),
                                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, **extra}, path)
            for r in range(world)]


@pytest.mark.timeout(300)
def test_mmengine_init_dist_dies_on_the_cpu_build(tmp_path: Path, marker: str) -> None:
    """The report's failure, reproduced: MMEngine calls torch.cuda.set_device whatever the
    hardware; the CPU build of torch has no CUDA to set."""
    [proc] = run_ranks(REPORT_02, rank_envs(marker, 1, {}), tmp_path)
    assert proc.returncode != 0
    assert "torch.cuda.set_device(local_rank)" in proc.stderr
    assert "module 'torch._C' has no attribute '_cuda_setDevice'" in proc.stderr


@pytest.mark.timeout(300)
def test_the_step_on_two_cpu_ranks(tmp_path: Path, marker: str) -> None:
    results = run_ranks(STEP, rank_envs(marker, 2, {}), tmp_path)
    for rank, proc in enumerate(results):
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout.splitlines()[-1])
        assert (out["device"], out["dist"], out["sum"], out["ctx_device"]) == (
            "cpu", [rank, 2], 3.0, "cpu")
        assert out["cfg"] == {
            "env_cfg": {"cudnn_benchmark": False, "dist_cfg": {"backend": "gloo"}},
            "launcher": "pytorch",
            "model_wrapper_cfg": {"type": "MMDistributedDataParallel", "device_ids": None}}
        assert "process group exists (distrun.init()); skipped" not in proc.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("extension", "kind"), [("torch_gcu", "gcu"), ("torch_npu", "npu")])
def test_the_step_with_vendor_stand_ins(tmp_path: Path, marker: str, extension: str,
                                        kind: str) -> None:
    """A GCU / NPU host whose torch is a CUDA build with no NVIDIA driver (report 02): MMEngine's
    own init_dist dies there; after setup() the rank is bound with the vendor's set_device,
    MMEngine's get_device() names the vendor's device, its init_dist call is a no-op, its
    collectives work and the model wrapper takes no CUDA device ids."""
    log = tmp_path / "calls.jsonl"
    path = fake_path(tmp_path, extension)
    extra = {"FAKE_VENDOR_LOG": str(log), "FAKE_DEVICE_COUNT": "2", "DISTRUN_BACKEND": "gloo"}
    [before] = run_ranks(NO_DRIVER + REPORT_02, rank_envs(marker, 1, extra, path), tmp_path)
    assert "Found no NVIDIA driver on your system" in before.stderr
    assert "torch.cuda.set_device(local_rank)" in before.stderr
    log.unlink(missing_ok=True)
    results = run_ranks(NO_DRIVER + STEP, rank_envs(marker, 2, extra, path), tmp_path)
    for rank, proc in enumerate(results):
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout.splitlines()[-1])
        assert (out["device"], out["dist"], out["sum"], out["ctx_device"]) == (
            kind, [rank, 2], 3.0, f"{kind}:{rank}")
        assert out["cfg"]["model_wrapper_cfg"] == {"type": "MMDistributedDataParallel",
                                                   "device_ids": None}
    bound = sorted(c for c in calls(log) if c[1] == f"torch.{kind}.set_device")
    assert bound == [["0", f"torch.{kind}.set_device", [0]],
                     ["1", f"torch.{kind}.set_device", [1]]]
