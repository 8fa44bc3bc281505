"""What a user sees from `distrun diagnose`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.cli.diagnose import main

CORPUS = Path(__file__).parent / "corpus"
SRC = Path(__file__).parents[2] / "src"


def test_human_output_names_cause_rank_evidence_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    case = CORPUS / "memory" / "oom-rank1-others-timeout.log"
    assert main([str(case)]) == 0
    out = capsys.readouterr().out
    assert "Root cause: Device out of memory (OOM on the accelerator) [cuda-out-of-memory]" in out
    assert "where: rank 1" in out
    assert f"{case}:4  torch.OutOfMemoryError: CUDA out of memory." in out
    assert "confidence: high" in out
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in out
    assert "rank 0: collective-timeout" in out


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(CORPUS / "memory" / "oom-rank3-qwen.log"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    cause = data["causes"][0]
    assert {"id", "title", "category", "rank", "node", "evidence", "fix"} <= set(cause)
    assert (cause["id"], cause["rank"], cause["category"]) == ("cuda-out-of-memory", 3, "memory")
    assert set(cause["evidence"][0]) == {"file", "line", "text"}
    assert cause["evidence"][0]["line"] == 2


def test_json_from_environment(capsys: pytest.CaptureFixture[str]) -> None:
    case = str(CORPUS / "build" / "libuv-windows.log")
    assert main([case], environ={"DISTRUN_DIAGNOSE_JSON": "1"}) == 0
    assert json.loads(capsys.readouterr().out)["causes"][0]["id"] == "libuv-missing"


def test_unknown_failure_exits_1_and_shows_earliest_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([str(CORPUS / "launcher" / "provoked-unknown-valueerror.log")]) == 1
    out = capsys.readouterr().out
    assert "No known cause" in out
    assert "rank 1" in out and "ValueError: tokenizer vocabulary file is corrupt" in out


def test_nothing_failed_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.log").write_text("step 1 loss 2.0\nstep 2 loss 1.9\n")
    assert main([str(tmp_path)]) == 0
    assert "nothing failed" in capsys.readouterr().out


def test_missing_path_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main([str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"distrun diagnose: error: {missing} does not exist; fix: pass a run directory "
        "(runs/<time>-<name>/) or a log file that exists\n"
    )


def test_module_entry_point_runs_as_a_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "distrun.cli.diagnose", str(tmp_path / "missing")],
        capture_output=True, text=True, env=env, check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
