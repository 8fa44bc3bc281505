"""Healthy runs are not failures: `distrun diagnose` on the output of a successful run says
"No errors found" and names no cause.

A weak wording, a tail wording or even a strong signature that a healthy run also prints makes
diagnose invent a failure. The fixtures are real output of successful runs:

- tests/diagnose/healthy/: captured on a CPU machine by healthy/capture.sh (torchrun with
  TORCH_DISTRIBUTED_DEBUG / TORCH_CPP_LOG_LEVEL, --tee and --log-dir, distrun launch and demo
  and a launch's run directory, Lightning, accelerate, DeepSpeed, MMEngine); and
  healthy/nccl-*.log, NCCL's own logging excerpts quoted from its documentation (the source
  is named in each file's provenance line in healthy/SOURCES.md);
- tests/fixtures/tools/: the accelerator tools' healthy output (nvidia-smi, npu-smi, cnmon,
  efsmi, rocm-smi, xpu-smi), whose provenance is tests/fixtures/tools/SOURCES.md.

The test only reads the committed files: no process is started.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.cli.diagnose import EXIT_FOUND_OR_CLEAN, main
from distrun.diagnose import diagnose

HERE = Path(__file__).parent
HEALTHY = HERE / "healthy"
TOOLS = HERE.parent / "fixtures" / "tools"
NOT_OUTPUT = {"SOURCES.md", "capture.sh"}


def healthy_paths() -> list[Path]:
    logs = sorted(p for p in HEALTHY.iterdir() if p.is_file() and p.name not in NOT_OUTPUT)
    run_dirs = sorted(p for p in HEALTHY.iterdir() if p.is_dir() and (p / "events.jsonl").exists())
    tools = sorted(p for p in TOOLS.rglob("*") if p.is_file() and p.name not in NOT_OUTPUT)
    return logs + run_dirs + tools


PATHS = healthy_paths()


def test_the_fixtures_are_there() -> None:
    """Every kind of healthy output is covered (a lost fixture would pass silently)."""
    names = {p.name for p in PATHS}
    assert {"torchrun-collectives-detail.log", "torchrun-ddp-tee.log",
            "torchrun-logdir-rank0-stderr.log", "distrun-launch-ddp.log", "distrun-demo.log",
            "distrun-launch-run", "lightning-fit-ddp.log", "lightning-fit-ddp-rerun-appended.log",
            "accelerate-launch-cpu.log",
            "deepspeed-torchrun.log", "mmengine-runner-torchrun.log", "hf-trainer-torchrun.log",
            "torchrun-two-nodes-node0.log", "nccl-info-docs-excerpt.log",
            "nvidia-smi-sample-gpus-h100.csv", "npu-smi-info-910b3-8x.txt"} <= names
    assert all(p.stat().st_size < 200_000 for p in PATHS if p.is_file())


@pytest.mark.parametrize("path", PATHS, ids=lambda p: str(p.relative_to(HERE.parent)))
def test_healthy_output_has_no_cause(path: Path) -> None:
    result = diagnose([path])
    found = [(c.rule.id, [f"{Path(h.file).name}:{h.line}: {h.text[:160]}" for h in c.evidence])
             for c in result.causes]
    assert found == []
    assert not result.failed, [h.text for h in result.unrecognised]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: str(p.relative_to(HERE.parent)))
def test_cli_says_no_errors_found(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(path)]) == EXIT_FOUND_OR_CLEAN
    out = capsys.readouterr().out
    assert out.startswith("No errors found in "), out
    # "nothing failed" only where a run record says the job ended with 0; a plain log that
    # prints no error may still be a job that hung or was stopped from outside
    ended_ok = "nothing failed." if (path / "events.jsonl").exists() else \
        "no line in them says that the job failed."
    assert ended_ok in out


def test_a_two_node_job_read_together_is_healthy(capsys: pytest.CaptureFixture[str]) -> None:
    """The two agents' logs of one job, read as one run (what `diagnose node0.log node1.log`
    is for): the other node's lines are no failure either."""
    nodes = sorted(HEALTHY.glob("torchrun-two-nodes-node*.log"))
    assert len(nodes) == 2
    assert main([str(p) for p in nodes]) == EXIT_FOUND_OR_CLEAN
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["No errors found in 2 file(s): no line in them says that the job failed.",
                       "If it hung or was stopped from outside, this is where each log ends:"]
    assert [line.split("  ")[1].rsplit(":", 1)[0] for line in out[2:]] == [str(p) for p in nodes]
