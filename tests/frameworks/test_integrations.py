"""distrun.integrations without a framework: no import at package import, and the reporter
that feeds the launcher's record when the script never called distrun.init()."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from distrun.integrations._report import StepReporter, as_float
from tests.conftest import REPO, cli_env


def test_the_package_imports_no_framework() -> None:
    code = ("import sys, distrun.integrations; "
            "print([m for m in ('transformers', 'lightning', 'pytorch_lightning', 'mmengine', "
            "'torch') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], env=cli_env(
        {"PYTHONPATH": str(REPO / "src")}), capture_output=True, text=True, timeout=60,
        check=False)
    assert (proc.returncode, proc.stdout.strip()) == (0, "[]"), proc.stderr


def test_reporter_without_init_writes_the_same_record(tmp_path: Path) -> None:
    reporter = StepReporter({"DISTRUN_RUN_DIR": str(tmp_path), "RANK": "1"})
    reporter.report(5, loss=torch.tensor(0.5), lr="0.1", note=None)
    assert (tmp_path / "heartbeats" / "rank-1").read_text().split()[1] == "5"
    [event] = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert (event["event"], event["rank"], event["step"], event["metrics"]) == (
        "progress", 1, 5, {"loss": 0.5, "lr": 0.1})


def test_reporter_outside_a_launch_does_nothing(tmp_path: Path) -> None:
    StepReporter({}).report(1, loss=1.0)
    assert list(tmp_path.iterdir()) == []


def test_as_float_takes_numbers_text_and_one_element_tensors() -> None:
    assert [as_float(v) for v in (2, 0.5, "1.5", torch.tensor([3.0]), torch.ones(2), "x",
                                  True, None)] == [2.0, 0.5, 1.5, 3.0, None, None, None, None]
