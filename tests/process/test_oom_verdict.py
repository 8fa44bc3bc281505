"""Real processes: rank 1 of a 2-rank gloo job runs out of host memory (RLIMIT_AS), and both the
end of distrun launch and distrun diagnose name the rank, its peak and the batch that fits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
JOB = Path(__file__).parent / "scripts" / "oom_job.py"
BATCH = 60000  # 60000 x 1024 x 4 bytes = 234 MiB for the first activation: far over the room


def launch(tmp_path: Path, marker: str, **env: str):  # type: ignore[no-untyped-def]
    args = ["launch", "--nproc-per-node", "2", "--per-device-batch-size", str(BATCH),
            "--run-dir", str(tmp_path / "run"), str(JOB), marker]
    return run_cli(args, tmp_path, timeout=150,
                   env={"DISTRUN_TEST_MARK": marker, "DISTRUN_CACHE_DIR": str(tmp_path / "cache"),
                        **env})


def oom_events(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "rank_oom"]


def test_rank_out_of_host_memory_is_named_with_its_peak_and_a_batch_that_fits(
        tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "DefaultCPUAllocator: can't allocate memory" in (
        tmp_path / "run" / "logs" / "rank-1.log").read_text()
    [event] = oom_events(tmp_path)
    assert event["rank"] == 1 and event["device"] == "cpu"
    assert event["batch_size"] == BATCH and event["fit"]["source"] == "ctx.estimate_memory"
    assert event["requested_bytes"] >= BATCH * 1024 * 4
    peak, cap = event["peak_bytes"], event["capacity_bytes"]
    assert isinstance(peak, int) and isinstance(cap, int) and 0 < peak <= cap
    verdict = next(line for line in done.stderr.splitlines()
                   if line.startswith("distrun: rank 1 ran out of memory on cpu"))
    fits = int(re.search(r"by the estimate batch <= (\d+) fits", verdict).group(1))
    assert 1 <= fits < BATCH
    gib = f"{peak / 2**20:.0f} MiB" if peak < 2**30 else f"{peak / 2**30:.2f} GiB"
    assert f"peak {gib} of " in verdict and "RLIMIT_AS" in verdict
    assert f"at batch {BATCH} (ctx.batch_size(), from distrun launch)" in verdict
    assert "the fit from ctx.estimate_memory at batch sizes 256, 512, 1024" in verdict
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["out_of_memory"] == [verdict.removeprefix("distrun: ")]
    diag = run_cli(["diagnose", str(tmp_path / "run")], tmp_path)
    assert "Out of memory (from the run record):" in diag.stdout, diag.stdout
    assert f"  {verdict.removeprefix('distrun: ')}" in diag.stdout.splitlines()
    as_json = json.loads(run_cli(["diagnose", "--json", str(tmp_path / "run")], tmp_path).stdout)
    [oom] = as_json["out_of_memory"]
    assert (oom["rank"], oom["batch_size"], oom["fitting_batch"]) == (1, BATCH, fits)


def test_without_a_fit_the_verdict_says_none_was_measured(tmp_path: Path, marker: str) -> None:
    done = launch(tmp_path, marker, OOM_FIT="0")
    assert done.returncode == 1, done.stderr[-3000:]
    verdict = next(line for line in done.stderr.splitlines()
                   if line.startswith("distrun: rank 1 ran out of memory on cpu"))
    assert f"at batch {BATCH} (ctx.batch_size(), from distrun launch)" in verdict
    assert "no memory fit was measured on this rank" in verdict
    assert "by the estimate" not in verdict


def test_the_next_launch_refuses_a_batch_that_cannot_fit_by_the_stored_fit(
        tmp_path: Path, marker: str) -> None:
    """The first run stored rank 0's fit (ctx.estimate_memory); the planned batch of the next
    launch is checked against it before anything starts (--dry-run starts nothing)."""
    done = launch(tmp_path, marker, OOM_RANK="9")  # nobody runs out: rank 0 stores its fit
    assert done.returncode == 0, done.stderr[-3000:]
    env = {"DISTRUN_TEST_MARK": marker, "DISTRUN_CACHE_DIR": str(tmp_path / "cache")}
    huge = run_cli(["launch", "--dry-run", "--json", "--nproc-per-node", "2",
                    "--per-device-batch-size", "100000000", str(JOB), marker], tmp_path, env=env)
    assert huge.returncode == 3, huge.stderr
    [error] = [f for f in json.loads(huge.stdout)["findings"] if f["severity"] == "error"]
    assert error["id"] == "memory-insufficient"
    assert re.match(r"host memory: [0-9.]+ GiB free, batch 100000000 \(2 processes x [0-9.]+ "
                    r"GiB by the fit ctx\.estimate_memory measured for oom_job\.py on "
                    r"20\d\d-\d\d-\d\d\) needs [0-9.]+ GiB in all by the estimate$",
                    error["message"]), error["message"]
    assert re.match(r"lower the batch to \d+ or less", error["fix"])
    small = run_cli(["launch", "--dry-run", "--json", "--nproc-per-node", "2",
                     "--per-device-batch-size", "100", str(JOB), marker], tmp_path, env=env)
    assert small.returncode == 0, small.stderr
    assert not [f for f in json.loads(small.stdout)["findings"] if f["id"].startswith("memory")]
