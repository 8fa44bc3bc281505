"""Bracketed user text printed as it is (the real-process cases are in test_matrix.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distrun.cli.demo import summary


def test_demo_summary_keeps_a_bracketed_run_directory(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "[exp1]" / "a[/]b"
    run.mkdir(parents=True)
    (run / "demo.json").write_text(json.dumps({
        "world_size": 2, "backend": "gloo", "devices": ["cpu[0]", "cpu[1]"],
        "steps_per_second": 10.0, "steps": 5, "losses": [1.0, 0.5], "final_loss": 0.5}))
    assert summary(run) == 0
    out = capsys.readouterr().out
    assert str(run) in out and "cpu[0], cpu[1]" in out
