"""The NVIDIA path on a real GPU: NVML and nvidia-smi detection, nccl through distrun launch
and distrun.init, the checks before launch and at init, the diagnosis of the failures a plain
script hits, and the batch finder against the GPU's real memory limit.

Skipped where torch sees no CUDA device (CI has none); run on a GPU machine with
``pytest tests/gpu``. ``DISTRUN_GPU_CAPTURE=DIR`` keeps the real tool output and failure logs
there (the replay fixtures in tests/fixtures/tools/nvidia came from such a run).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_cli

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(300),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a real NVIDIA GPU"),
]
JOB = Path(__file__).parent / "jobs" / "job.py"


def gpus() -> int:
    return int(torch.cuda.device_count())


def capture(name: str, text: str) -> None:
    where = os.environ.get("DISTRUN_GPU_CAPTURE")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / name).write_text(text)


def results(out: Path, world: int) -> list[dict[str, object]]:
    return [json.loads(Path(f"{out}.{rank}").read_text()) for rank in range(world)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(tmp_path: Path, marker: str, nproc: int, mode: str, extra: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
           "--master-port", str(free_port()), str(JOB), mode, str(tmp_path / "out")]
    env = cli_env({"DISTRUN_TEST_MARK": marker, **(extra or {})})
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240, check=False)


def launch(tmp_path: Path, marker: str, mode: str, nproc: str = "1", *flags: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``distrun launch`` of ``job.py MODE``; its console output kept as launch-MODE.txt."""
    done = run_cli(["launch", "--nproc-per-node", nproc, "--run-dir", str(tmp_path / "run"),
                    *flags, str(JOB), mode, str(tmp_path / "out")], tmp_path, timeout=280,
                   env={"DISTRUN_TEST_MARK": marker, **(env or {})})
    capture(f"launch-{mode}.txt", done.stdout + done.stderr)
    return done


def diagnose(tmp_path: Path, name: str, text: str) -> dict[str, object]:
    log = tmp_path / name
    log.write_text(text)
    capture(name, text)
    done = run_cli(["diagnose", str(log), "--json"], tmp_path)
    return dict(json.loads(done.stdout))


def test_doctor_reports_the_gpus_torch_sees(tmp_path: Path) -> None:
    done = run_cli(["doctor", "--json"], tmp_path)
    capture("doctor.json", done.stdout)
    report = json.loads(done.stdout)
    nvidia = report["devices"]["nvidia"]
    assert (nvidia["status"], nvidia["source"]) == ("found", "nvml")
    assert len(nvidia["devices"]) == gpus()
    first = nvidia["devices"][0]
    props = torch.cuda.get_device_properties(0)
    assert first["name"] == torch.cuda.get_device_name(0)
    assert abs(first["memory_bytes"] - props.total_memory) < 0.02 * props.total_memory
    assert report["node"]["vendor"] == "nvidia" and report["node"]["count"] == gpus()
    assert report["backends"]["nccl"] is True


def test_nvidia_smi_fallback_reads_what_nvml_reads() -> None:
    from distrun.accelerators.probes import nvidia

    smi = shutil.which("nvidia-smi")
    if smi is None:
        pytest.skip("no nvidia-smi on PATH")
    out = subprocess.run(nvidia.SMI_QUERY, capture_output=True, text=True, check=True).stdout
    capture("nvidia-smi-query.csv", out)
    via_smi, via_nvml = nvidia.parse_smi_csv(out), nvidia.probe_nvml()
    assert via_nvml is not None and via_nvml.status == via_smi.status == "found"
    assert via_smi.driver == via_nvml.driver
    for a, b in zip(via_smi.devices, via_nvml.devices, strict=True):
        assert (a.index, a.name, a.uuid) == (b.index, b.name, b.uuid)
        assert a.bus_id is not None and b.bus_id is not None
        assert a.bus_id.lower().lstrip("0") == b.bus_id.lower().lstrip("0")
        assert abs(a.memory_bytes - b.memory_bytes) <= 2**20  # smi rounds to MiB


def test_nvml_and_nvidia_smi_samplers_see_this_process_on_the_gpu() -> None:
    from distrun.accelerators.probes import run_tool
    from distrun.accelerators.sessions import NVML, open_session
    from distrun.monitor import devices

    held = torch.empty(2**30, dtype=torch.uint8, device="cuda:0")  # 1 GiB, this process
    capture("nvidia-smi-sample-gpus.csv", run_tool(devices.SMI_GPUS))
    capture("nvidia-smi-sample-apps.csv", run_tool(devices.SMI_APPS))
    nvml = devices.NvmlSampler(open_session(NVML)).read().devices[0]
    smi = devices.SmiSampler().read().devices[0]
    for sample in (nvml, smi):
        assert sample.name == torch.cuda.get_device_name(0)
        assert sample.pids is not None and os.getpid() in sample.pids, sample
        assert sample.memory_used_bytes is not None and sample.memory_used_bytes >= held.numel()
    assert abs(nvml.memory_total_bytes - smi.memory_total_bytes) <= 2**20  # type: ignore[operator]
    del held


def test_launch_binds_one_rank_per_gpu_on_nccl(tmp_path: Path, marker: str) -> None:
    n = gpus()
    done = launch(tmp_path, marker, "bind", "gpu")
    assert done.returncode == 0, done.stderr[-3000:]
    for rank, got in enumerate(results(tmp_path / "out", n)):
        assert got["device"] == f"cuda:{rank}" and got["current"] == rank
        assert got["backend"] == got["group_backend"] == "nccl"
        assert got["reduced"] == [n * (n + 1) / 2] * 4
        assert got["sampled"] == 64 // n
    assert f"verify: ok: {n}/{n} ranks joined" in done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "succeeded" and summary["world_size"] == n
    progress = json.loads((tmp_path / "run" / "progress" / "rank-0.json").read_text())
    assert progress["backend"] == "nccl" and progress["device"] == "cuda:0"
    (group,) = progress["groups"].values()  # read from nccl's Flight Recorder
    steps = int(results(tmp_path / "out", n)[0]["steps"])  # type: ignore[call-overload]
    assert group["completed"] == group["enqueued"] >= steps + 1
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").open()]
    seen = [d for s in samples for d in s["devices"] if progress["pid"] in (d["pids"] or ())]
    assert seen and all(d["memory_used_bytes"] > 2**20 for d in seen), samples[-1]


def test_one_group_on_nccl_and_gloo_keeps_both_recorders_counts(tmp_path: Path, marker: str
                                                              ) -> None:
    done = launch(tmp_path, marker, "mixed")
    for name in ("out.nccl.json", "out.fr.json"):
        capture(f"fr-status-mixed-{name.split('.')[1]}.json", (tmp_path / name).read_text())
    assert done.returncode == 0, done.stderr[-3000:]
    progress = json.loads((tmp_path / "run" / "progress" / "rank-0.json").read_text())
    counts = {pg: (g["enqueued"], g["completed"]) for pg, g in progress["groups"].items()}
    assert counts == {"0": (3, 3), "0+cpu": (2, 2)}


def test_a_gloo_job_on_a_cuda_build_keeps_its_plain_group_name(tmp_path: Path, marker: str
                                                               ) -> None:
    done = launch(tmp_path, marker, "gloo_only", "1", "--backend", "gloo")
    assert done.returncode == 0, done.stderr[-3000:]
    progress = json.loads((tmp_path / "run" / "progress" / "rank-0.json").read_text())
    counts = {pg: g["enqueued"] for pg, g in progress["groups"].items()}
    assert counts == {"0": 5}


def test_collective_queued_behind_gpu_work_is_seen_in_flight(tmp_path: Path, marker: str
                                                            ) -> None:
    done = launch(tmp_path, marker, "slow_collective")
    capture("slow-events.jsonl", (tmp_path / "run" / "events.jsonl").read_text())
    assert done.returncode == 0, done.stderr[-3000:]
    (group,) = results(tmp_path / "out", 1)[0]["in_flight"].values()  # type: ignore[attr-defined]
    assert (group["enqueued"], group["completed"]) == (2, 1)
    assert group["op"] == "nccl:all_reduce" and group["sizes"] == [[1024]], group
    assert "hang" not in done.stderr.lower()  # one rank, busy GPU: nobody waits for anybody


def test_more_ranks_than_gpus_is_refused_before_launch(tmp_path: Path, marker: str) -> None:
    n = gpus()
    done = launch(tmp_path, marker, "bind", str(n + 1))
    assert done.returncode != 0
    assert f"{n + 1} processes per node, but each node has {n}" in done.stderr
    assert f"--nproc-per-node {n}" in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("out.*"))  # nothing was started


def test_plain_script_past_the_last_gpu_is_diagnosed_as_invalid_ordinal(
        tmp_path: Path, marker: str) -> None:
    done = torchrun(tmp_path, marker, gpus() + 1, "plain_ordinal")
    assert done.returncode != 0
    assert "invalid device ordinal" in done.stderr.lower()
    verdict = diagnose(tmp_path, "plain-ordinal.log", done.stdout + done.stderr)
    cause = verdict["causes"][0]  # type: ignore[index]
    assert (cause["id"], cause["rank"]) == ("cuda-invalid-device-ordinal", gpus())


def test_two_ranks_on_one_gpu_are_named_by_verify_and_by_diagnose(
        tmp_path: Path, marker: str) -> None:
    """A plain script that binds every rank to cuda:0, forced past the preflight: nccl fails
    with "Duplicate GPU detected"; distrun names the shared GPU and the cause."""
    done = launch(tmp_path, marker, "plain_dup", "2", "--force", "--master-port",
                  str(free_port()), env={"NCCL_DEBUG": "WARN"})
    assert done.returncode == 1
    assert "verify: ERROR: 2/2 ranks joined, but ranks 0 and 1 share cuda:0" in done.stderr
    assert "Root cause: Two ranks on the same GPU" in done.stderr
    verdict = json.loads(run_cli(["diagnose", str(tmp_path / "run"), "--json"], tmp_path).stdout)
    assert verdict["causes"][0]["id"] == "duplicate-gpu"


def test_init_names_two_ranks_sharing_a_gpu_before_nccl(tmp_path: Path, marker: str) -> None:
    """Two processes told they are local rank 0 (a per-process override): distrun.init
    names both ranks and the GPU before nccl is reached."""
    port = free_port()
    procs = [subprocess.Popen(
        [sys.executable, str(JOB), "bind", str(tmp_path / "out")], cwd=tmp_path,
        env=cli_env({"DISTRUN_TEST_MARK": marker, "RANK": str(rank), "WORLD_SIZE": "2",
                     "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    capture("init-shared.txt", "\n".join(o[1] for o in outs))
    for proc, (_, err) in zip(procs, outs, strict=True):
        assert proc.returncode != 0
        assert "ranks 0 and 1 are both bound to cuda:0" in err
    assert not list(tmp_path.glob("out.*"))


def test_batch_finder_lands_just_under_the_gpus_real_limit(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, "find")
    assert done.returncode == 0, done.stderr[-3000:]
    got = results(tmp_path / "out", 1)[0]
    capture("find.json", json.dumps(got))
    limit, found = int(got["limit"]), int(got["found"])  # type: ignore[call-overload]
    assert got["runs_at_found"] is True
    assert 0.85 * limit <= found <= limit, got
    predicted, measured = int(got["predicted_64"]), int(got["measured_64"])  # type: ignore[call-overload]
    assert abs(predicted - measured) < 0.1 * measured, got


@pytest.mark.parametrize(("optimizer", "make"), [
    ("adamw", torch.optim.AdamW),
    ("sgd-momentum", lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
])
def test_estimate_matches_the_model_states_measured_on_the_gpu(
        tmp_path: Path, optimizer: str, make: object) -> None:
    done = run_cli(["estimate", "--model", f"{JOB.parent / 'model.py'}:build", "--optimizer",
                    optimizer, "--precision", "fp32", "--json"], tmp_path)
    predicted = json.loads(done.stdout)["per_device_bytes"]
    sys.path.insert(0, str(JOB.parent))
    try:
        from model import build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(JOB.parent))
    warm = torch.nn.Linear(64, 64).cuda()  # cuBLAS's workspaces come from the same allocator:
    warm(torch.randn(8, 64, device="cuda")).sum().backward()  # made here, before the count
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    model = build().cuda()
    opt = make(model.parameters())  # type: ignore[operator]
    model(torch.randn(8, 4096, device="cuda")).square().mean().backward()
    opt.step()
    torch.cuda.synchronize()
    measured = torch.cuda.memory_allocated() - before  # parameters, gradients, optimizer state
    capture(f"estimate-{optimizer}.json", json.dumps({"predicted": predicted, "measured": measured}))
    del model, opt
    torch.cuda.empty_cache()
    states = predicted["params"] + predicted["grads"] + predicted["optimizer"]
    assert abs(states - measured) <= 0.01 * measured, (states, measured)


def test_demo_trains_on_the_gpus(tmp_path: Path, marker: str) -> None:
    done = run_cli(["demo"], tmp_path, timeout=240, env={"DISTRUN_TEST_MARK": marker})
    capture("demo.txt", done.stdout + done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"world size      {gpus()} ranks (nccl)" in done.stdout
    assert "cuda:0" in done.stdout and "(falling)" in done.stdout
