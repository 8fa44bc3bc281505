"""The out-of-memory verdict's wording, the rank_oom record, and the launch memory preflight:
pure functions over typed values. The accelerator cases replay a CUDA error and nvidia-smi
rows (this machine has no GPU); the CPU record is read from this process for real."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distrun.estimate.oom import report
from distrun.estimate.preflight import HOST, DeviceMemory, StoredFit, planned_batch_findings
from distrun.instrument import oomrecord
from distrun.model import oom
from distrun.model.record import BadLine, RankOom, parse_event
from distrun.monitor.devices import parse_smi

GIB, MIB = 2**30, 2**20
CPU_ERROR = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
             "memory: you tried to allocate 245760000 bytes. Error code 12 (Cannot allocate "
             "memory)")
# torch 2.x's CUDA caching allocator message (c10/cuda/CUDACachingAllocator.cpp)
CUDA_ERROR = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
              "79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process "
              "has 78.12 GiB memory in use.")


def event(**fields: Any) -> RankOom:
    parsed = parse_event(json.dumps({"event": "rank_oom", "rank": 1, **fields}))
    assert isinstance(parsed, RankOom), parsed
    return parsed


def test_cpu_verdict_names_rank_peak_limit_batch_and_the_fitting_batch() -> None:
    got = report(event(
        device="cpu", device_name="host memory", peak_bytes=326 * MIB, capacity_bytes=360 * MIB,
        peak_source="VmHWM, the resident set's peak",
        capacity_source="RLIMIT_AS 0.85 GiB of address space", requested_bytes=245760000,
        batch_size=60000, batch_source="ctx.batch_size(), from distrun launch",
        fit={"intercept": 307 * MIB, "slope": 13 * 1024, "sizes": [256, 512, 1024],
             "source": "ctx.estimate_memory"}))
    assert (got.rank, got.fitting_batch, got.grad_accum) == (1, 3757, None)
    assert got.message == (
        "rank 1 ran out of memory on cpu (host memory); peak 326 MiB of 360 MiB (VmHWM, the "
        "resident set's peak; limit: RLIMIT_AS 0.85 GiB of address space); the failed "
        "allocation asked for 234 MiB; at batch 60000 (ctx.batch_size(), from distrun launch); "
        "by the estimate batch <= 3757 fits (the fit from ctx.estimate_memory at batch sizes "
        "256, 512, 1024: 307 MiB + 13 KiB per sample; under 360 MiB with 10% of the room for "
        "the batch kept free)")


def test_cuda_verdict_keeps_the_global_batch_exact() -> None:
    got = report(event(
        device="cuda:1", device_name="NVIDIA H100 80GB HBM3", peak_bytes=int(78.12 * GIB),
        capacity_bytes=int(79.19 * GIB), peak_source="torch.cuda.max_memory_allocated",
        capacity_source="the device's total memory",
        requested_bytes=oom.requested_bytes(CUDA_ERROR), batch_size=48,
        batch_source="ctx.batch_size()", global_batch=512, world_size=8,
        fit={"intercept": 20 * GIB, "slope": 1.5 * GIB, "sizes": [2, 4, 8],
             "source": "ctx.find_batch_size's trials"}))
    assert (got.fitting_batch, got.grad_accum) == (35, 2)
    assert got.message == (
        "rank 1 ran out of memory on cuda:1 (NVIDIA H100 80GB HBM3); peak 78.12 GiB of "
        "79.19 GiB (torch.cuda.max_memory_allocated; limit: the device's total memory); the "
        "failed allocation asked for 2.00 GiB; at batch 48 (ctx.batch_size()); by the "
        "estimate batch <= 35 fits, i.e. batch 32 with 2 gradient-accumulation steps for the "
        "global batch 512 (the fit from ctx.find_batch_size's trials at batch sizes 2, 4, 8: "
        "20.00 GiB + 1.50 GiB per sample; under 79.19 GiB with 10% of the room for the batch "
        "kept free)")


@pytest.mark.parametrize(("fields", "tail"), [
    ({"found_batch": {"size": 24, "source": "ctx.find_batch_size"}},
     "batch size not known to distrun (ctx.batch_size() or --per-device-batch-size); no memory "
     "fit was measured on this rank (ctx.estimate_memory or ctx.find_batch_size measures the "
     "batch that fits); ctx.find_batch_size agreed on batch 24"),
    ({"batch_size": 8, "capacity_bytes": 10 * GIB,
      "fit": {"intercept": GIB, "slope": 0.5 * GIB, "sizes": [1, 2], "source": "x"}},
     "at batch 8; the estimate said batch 8 fits, and it did not (the fit from x at batch "
     "sizes 1, 2: 1.00 GiB + 512 MiB per sample): measure again near this batch"),
    ({"batch_size": 8, "capacity_bytes": GIB,
      "fit": {"intercept": 2 * GIB, "slope": MIB, "sizes": [1, 2], "source": "x"}},
     "at batch 8; by the estimate not even batch 1 fits under 1.00 GiB (the fit from x at "
     "batch sizes 1, 2: 2.00 GiB + 1 MiB per sample): shard the model or free memory"),
    ({"batch_size": 8, "fit": {"intercept": GIB, "slope": MIB, "sizes": [1], "source": "x"}},
     "at batch 8; the memory limit is not known, so no batch size is estimated (the fit from "
     "x at batch sizes 1: 1.00 GiB + 1 MiB per sample)"),
])
def test_only_what_is_known_is_said(fields: dict[str, Any], tail: str) -> None:
    message = report(event(**fields)).message
    assert message == f"rank 1 ran out of memory; {tail}"


def test_a_bad_record_is_a_bad_line_not_a_verdict() -> None:
    bad = parse_event(json.dumps({"event": "rank_oom", "rank": 1, "peak_bytes": -5}), "e", 7)
    assert isinstance(bad, BadLine) and str(bad).startswith("e:7: bad rank_oom event: peak_bytes")


@pytest.mark.parametrize(("text", "want"), [
    (CPU_ERROR, 245760000), (CUDA_ERROR, 2 * GIB),
    ("XPU out of memory. Tried to allocate 512.00 MiB", 512 * MIB), ("out of memory", None)])
def test_requested_bytes(text: str, want: int | None) -> None:
    assert oom.requested_bytes(text) == want


@pytest.fixture
def notes() -> Iterator[None]:
    oom._NOTES.clear()
    yield
    oom._NOTES.clear()


def test_the_record_reads_this_process_and_the_runtime_notes(notes: None) -> None:
    env = {"WORLD_SIZE": "2", "DISTRUN_PER_DEVICE_BATCH_SIZE": "64"}
    got = oomrecord.record(RuntimeError(CPU_ERROR), 1, env)
    assert got["device"] == "cpu" and got["requested_bytes"] == 245760000
    assert 0 < got["peak_bytes"] <= got["capacity_bytes"]
    assert (got["batch_size"], got["world_size"]) == (64, 2)
    assert got["batch_source"] == "DISTRUN_PER_DEVICE_BATCH_SIZE from distrun launch"
    assert "fit" not in got and "found_batch" not in got
    oom.note_batch(32, "ctx.plan_batch")
    oom.note_fit(1e8, 4096.0, (2, 4), "ctx.estimate_memory")
    got = oomrecord.record(MemoryError(), 1, env)
    assert (got["batch_size"], got["batch_source"]) == (32, "ctx.plan_batch")
    assert got["fit"] == {"intercept": 1e8, "slope": 4096.0, "sizes": [2, 4],
                          "source": "ctx.estimate_memory"}
    assert isinstance(parse_event(json.dumps({"event": "rank_oom", **got})), RankOom)


def test_a_cuda_error_without_an_accelerator_leaves_the_device_unknown() -> None:
    got = oomrecord.record(RuntimeError(CUDA_ERROR), 0, {})
    assert got["device"] is None and "peak_bytes" not in got


FIT = StoredFit(300 * MIB, 16 * 1024, (256, 512, 1024), "ctx.estimate_memory",
                "2026-11-22T23:40:00Z")


def test_preflight_refuses_a_batch_the_host_cannot_hold() -> None:
    host = [DeviceMemory(0, HOST, 14 * GIB, 16 * GIB)]
    [error] = planned_batch_findings(host, 200000, FIT, script="train.py", per_device=4)
    assert (error.id, error.severity) == ("memory-insufficient", "error")
    assert error.message == ("host memory: 2.0 GiB free, batch 200000 (4 processes x 3.34 GiB "
                             "by the fit ctx.estimate_memory measured for train.py on "
                             "2026-11-22) needs 13.4 GiB in all by the estimate")
    assert error.fix.startswith("lower the batch to 13568 or less, ")
    assert planned_batch_findings(host, 13568, FIT, script="train.py", per_device=4) == []


def test_preflight_on_replayed_nvidia_smi_names_the_busy_device() -> None:
    gpus = ("0, NVIDIA H100 80GB HBM3, 0, 1, 81559, GPU-a\n"
            "1, NVIDIA H100 80GB HBM3, 97, 61234, 81559, GPU-b\n")
    reading = parse_smi(gpus, "GPU-b, 48213, 61220\n")
    devices = [DeviceMemory(d.index, d.name, d.memory_used_bytes, d.memory_total_bytes,
                            tuple(f"{p} python" for p in d.pids or ())) for d in reading.devices]
    fit = StoredFit(20 * GIB, 0.5 * GIB, (2, 4, 8), "ctx.find_batch_size's trials")
    found = planned_batch_findings(devices, 16, fit, script="train.py")
    assert [(f.id, f.severity) for f in found] == [("device-busy", "warning"),
                                                   ("memory-insufficient", "error")]
    assert found[0].message == ("device 1 (NVIDIA H100 80GB HBM3) already holds 59.8 GiB for "
                                "other processes: 48213 python")
    assert found[1].message.startswith("device 1 (NVIDIA H100 80GB HBM3): 19.8 GiB free, "
                                       "batch 16 (28.00 GiB by the fit")
    assert found[1].fix.startswith("free memory there")  # even batch 1 does not fit device 1
    unknown = planned_batch_findings(devices, 16, None, script="train.py")
    assert [(f.id, f.status) for f in unknown] == [("device-busy", "failed"),
                                                   ("memory-estimate-unknown", "unknown")]
    assert unknown[1].message == ("batch 16 per device is not checked against memory: no fit "
                                  "of train.py's memory was measured here yet")
    assert [f.id for f in planned_batch_findings(devices, None, fit, script="t")] == [
        "device-busy"]


def test_the_fit_is_stored_for_the_next_launch_only_under_distrun_launch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, notes: None) -> None:
    from distrun.cli.memcheck import stored_fit
    from distrun.runtime.batchfind import remember_fit
    from distrun.runtime.memory import MemoryFit

    script = tmp_path / "train.py"
    script.write_text("")
    monkeypatch.setattr(sys, "argv", [str(script)])
    fit = MemoryFit("cpu", (2, 4), (10, 20), 5e8, 2048.0)
    env = {"DISTRUN_CACHE_DIR": str(tmp_path / "cache")}
    remember_fit(fit, "ctx.estimate_memory", 2, env, rank=0)
    assert oom.noted_fit() == oom.FitNote(5e8, 2048.0, (2, 4), "ctx.estimate_memory")
    assert not (tmp_path / "cache").exists()  # not launched by distrun: nothing stored
    remember_fit(fit, "ctx.estimate_memory", 2, {**env, "DISTRUN_RUN_DIR": str(tmp_path)},
                 rank=1)
    assert not (tmp_path / "cache").exists()  # rank 0 alone writes
    remember_fit(fit, "ctx.estimate_memory", 2, {**env, "DISTRUN_RUN_DIR": str(tmp_path)})
    got = stored_fit(env, str(script), "cpu", 2)
    assert got is not None and (got.intercept, got.slope, got.sizes, got.source) == (
        5e8, 2048.0, (2, 4), "ctx.estimate_memory")
    assert stored_fit(env, str(script), "cpu", 4) is None  # another world size


@pytest.mark.parametrize(("text", "index"), [
    (CUDA_ERROR, 1), ("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 3; 79.15 GiB total "
                      "capacity; 1.2 GiB already allocated)", 3),
    ("NPU out of memory. Tried to allocate 1.50 GiB (NPU 0; 60.97 GiB total capacity)", 0),
    (CPU_ERROR, None)])
def test_the_device_the_error_names(text: str, index: int | None) -> None:
    assert oom.device_index(text) == index


def test_diagnose_of_a_replayed_cuda_run_directory_prints_the_record(tmp_path: Path) -> None:
    """A run directory as distrun launch leaves it after rank 1 ran out of GPU memory (the log
    line is torch's message; the rank_oom line the instrumentation's, with replayed values)."""
    from distrun.diagnose import diagnose, to_json, write_text

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-1.log").write_text(
        f"2026-11-22T23:40:36.970994Z err torch.OutOfMemoryError: {CUDA_ERROR}\n")
    record = {"time": "2026-11-22T23:40:37.019164Z", "event": "rank_oom", "rank": 1,
              "device": "cuda:1", "device_name": "NVIDIA H100 80GB HBM3",
              "peak_bytes": int(78.12 * GIB), "capacity_bytes": int(79.19 * GIB),
              "peak_source": "torch.cuda.max_memory_allocated",
              "capacity_source": "the device's total memory", "batch_size": 48,
              "batch_source": "ctx.batch_size()", "requested_bytes": 2 * GIB,
              "fit": {"intercept": 20 * GIB, "slope": 1.5 * GIB, "sizes": [2, 4, 8],
                      "source": "ctx.estimate_memory"}}
    exited = {"time": "2026-11-22T23:40:38Z", "event": "rank_exited", "rank": 1, "exitcode": 1,
              "role": "first failure"}
    (tmp_path / "events.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(exited) + "\n")
    found = diagnose([tmp_path])
    assert found.causes[0].rule.id == "cuda-out-of-memory" and found.causes[0].rank == 1
    out = io.StringIO()
    write_text(found, out)
    lines = out.getvalue().splitlines()
    at = lines.index("Out of memory (from the run record):")
    assert lines[at + 1].startswith("  rank 1 ran out of memory on cuda:1 (NVIDIA H100 80GB "
                                    "HBM3); peak 78.12 GiB of 79.19 GiB")
    assert "at batch 48 (ctx.batch_size()); by the estimate batch <= 35 fits" in lines[at + 1]
    [oom_json] = to_json(found)["out_of_memory"]
    assert (oom_json["rank"], oom_json["fitting_batch"]) == (1, 35)


def test_absurd_numbers_in_a_record_give_a_sentence_not_an_error() -> None:
    got = report(event(capacity_bytes=2**62, batch_size=2**40, fit={
        "intercept": -1e300, "slope": 1e-300, "sizes": [1], "source": "x"}))
    assert got.fitting_batch == 2**31 - 1
    assert "by the estimate batch <= 2147483647 fits" in got.message
    host = [DeviceMemory(0, HOST, 1, 2**62)]
    [error] = planned_batch_findings(host, 2**62, StoredFit(0.0, 1e300), script="t")
    assert error.id == "memory-insufficient"
