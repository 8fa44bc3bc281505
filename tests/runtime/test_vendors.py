"""Vendor binding against stand-in extensions (this machine has no NPU, GCU or MLU), and the
proof that no CUDA function is called on a host without CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runtime.helpers import calls, fake_path, free_port, result, run_ranks, worker_env

VENDORS = [("torch_npu", "npu"), ("torch_gcu", "gcu"), ("torch_mlu", "mlu")]


@pytest.mark.parametrize(("extension", "kind"), VENDORS)
def test_binds_with_the_vendors_own_calls(tmp_path: Path, marker: str, extension: str,
                                          kind: str) -> None:
    log = tmp_path / "calls.jsonl"
    env = worker_env(marker, {"FAKE_VENDOR_LOG": str(log), "FAKE_DEVICE_COUNT": "2",
                              "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "1",
                              "WORKER_RECORD_CUDA": "1"}, fake_path(tmp_path, extension))
    [(code, _, err)] = run_ranks(tmp_path, [env], marker)
    assert code == 0, err
    assert calls(log) == [["0", f"import {extension}", []],
                          ["0", f"torch.{kind}.device_count", []],
                          ["0", f"torch.{kind}.set_device", [1]]]
    out = result(tmp_path, 0)
    assert (out["device"], out["environment"], out["cuda_calls"]) == (f"{kind}:1", "manual", [])


@pytest.mark.parametrize("kind", ["cuda", "xpu"])
def test_built_in_device_types_use_their_torch_namespace(tmp_path: Path, marker: str,
                                                         kind: str) -> None:
    """cuda and xpu have no extension: torch.cuda / torch.xpu are patched to record."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "patched.py"
    script.write_text(
        "import json, sys, torch, distrun\n"
        f"ns = torch.{kind}\n"
        "log = open(sys.argv[1], 'a')\n"
        "ns.device_count = lambda: log.write(json.dumps('device_count') + '\\n') and 4\n"
        "ns.set_device = lambda i: log.write(json.dumps(['set_device', i]) + '\\n')\n"
        "ctx = distrun.init()\n"
        "log.close()\n"
        "print(ctx.device, ctx.backend)\n")
    env = worker_env(marker, {"DISTRUN_DEVICE_TYPE": kind, "RANK": "0", "WORLD_SIZE": "1",
                              "LOCAL_RANK": "2"})
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(script), str(log), marker], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    # str(torch.device("xpu", 2)); WORLD_SIZE=1 set by hand: a group of one (gloo: no nccl here)
    assert proc.stdout.split() == [f"{kind}:2", "gloo"]
    assert log.read_text().split() == ['"device_count"', '["set_device",', "2]"]


def test_declared_inventory_warns_one_process_many_devices(tmp_path: Path, marker: str) -> None:
    log = tmp_path / "calls.jsonl"
    env = worker_env(marker, {"FAKE_VENDOR_LOG": str(log), "DISTRUN_INVENTORY": "1x8xgcu"},
                     fake_path(tmp_path, "torch_gcu"))
    [(code, _, err)] = run_ranks(tmp_path, [env], marker)
    assert code == 0, err
    out = result(tmp_path, 0)
    assert out["warnings"] == ["8 devices visible (gcu), 1 process: start with `distrun launch` "
                               "to use all 8"]
    # the declared inventory gives the count: only the import and the binding reach the vendor
    assert calls(log) == [["0", "import torch_gcu", []], ["0", "torch.gcu.set_device", [0]]]


def test_local_rank_beyond_devices_fails_before_the_vendor(tmp_path: Path, marker: str) -> None:
    log = tmp_path / "calls.jsonl"
    env = worker_env(marker, {"FAKE_VENDOR_LOG": str(log), "FAKE_DEVICE_COUNT": "2",
                              "TORCHELASTIC_RUN_ID": "t", "RANK": "3", "WORLD_SIZE": "4",
                              "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4",
                              "ASCEND_RT_VISIBLE_DEVICES": "0,1", "MASTER_ADDR": "127.0.0.1",
                              "MASTER_PORT": "1"}, fake_path(tmp_path, "torch_npu"))
    [(code, _, err)] = run_ranks(tmp_path, [env], marker)
    assert code == 3
    assert err.startswith(
        "InitError: LOCAL_RANK=3 (rank 3, started by torchelastic) but this node shows 2 npu "
        "device(s) (ASCEND_RT_VISIBLE_DEVICES=0,1): 4 processes were started on this node; "
        "npu:3 would fail as an invalid device ordinal")
    assert "--nproc-per-node 2" in err and "Traceback" not in err
    assert ["3", "torch.npu.set_device", [3]] not in calls(log)


def test_vendor_backend_missing_is_an_init_error(tmp_path: Path, marker: str) -> None:
    env = worker_env(marker, {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                              "MASTER_PORT": "1"}, fake_path(tmp_path, "torch_mlu"))
    [(code, _, err)] = run_ranks(tmp_path, [env], marker)
    assert code == 3
    assert "InitError: device type 'mlu' needs backend cncl, which this torch build lacks" in err


@pytest.mark.slow
def test_two_ranks_bound_to_one_device(tmp_path: Path, marker: str) -> None:
    port = str(free_port())
    path = fake_path(tmp_path, "torch_npu")
    envs = [worker_env(marker, {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                "WORKER_BACKEND": "gloo", "FAKE_DEVICE_COUNT": "2"}, path)
            for r in (0, 1)]
    results = run_ranks(tmp_path, envs, marker)
    for code, _, err in results:
        assert code == 3, err
        assert "InitError: ranks 0 and 1 are both bound to npu:0 on " in err
        assert "give each process of a node its own LOCAL_RANK" in err


def test_no_cuda_call_on_a_host_without_cuda(tmp_path: Path, marker: str) -> None:
    """Every torch.cuda function is wrapped to record its caller; init, a step and a
    checkpoint record none. The control (DISTRUN_DEVICE_TYPE=cuda) proves the recorder works."""
    env = worker_env(marker, {"WORKER_RECORD_CUDA": "1"})
    [(code, _, err)] = run_ranks(tmp_path, [env], marker)
    assert code == 0, err
    assert result(tmp_path, 0)["cuda_calls"] == []
    control = tmp_path / "control"
    control.mkdir()
    script = control / "control.py"
    script.write_text(
        "import runpy, sys, torch.cuda\n"
        "calls = []\n"
        "real = torch.cuda.device_count\n"
        "torch.cuda.device_count = lambda: calls.append('device_count') or real()\n"
        "import distrun\n"
        "try:\n    distrun.init()\nexcept distrun.InitError as e:\n    print(calls, e)\n")
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(script), marker],
                          env={**env, "DISTRUN_DEVICE_TYPE": "cuda"}, cwd=control,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.stdout.startswith("['device_count'] LOCAL_RANK=0"), proc.stderr
    assert "shows 0 cuda device(s)" in proc.stdout
