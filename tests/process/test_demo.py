from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_demo_trains_on_two_ranks_with_falling_loss(tmp_path: Path) -> None:
    done = run_cli(["demo"], tmp_path, timeout=140)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "world size      2 ranks (gloo)" in done.stdout
    assert "(falling)" in done.stdout
    (run,) = (tmp_path / "runs").iterdir()
    result = json.loads((run / "demo.json").read_text())
    assert result["world_size"] == 2 and result["losses"][-1] < result["losses"][0]
    assert (run / "checkpoint.pt").stat().st_size > 0
    assert str(run.name) in done.stdout
