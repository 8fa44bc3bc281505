"""What a user sees from `distrun diagnose`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.cli.diagnose import main
from distrun.diagnose.normalize import MAX_LINE

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
    """A log with no error may still be a job that hung: where it stopped is shown."""
    (tmp_path / "train.log").write_text("step 1 loss 2.0\nstep 2 loss 1.9\n\n")
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        "No errors found in 1 file(s): no line in them says that the job failed.\n"
        "If it hung or was stopped from outside, this is where each log ends:\n"
        f"  {tmp_path / 'train.log'}:2  step 2 loss 1.9\n")


@pytest.mark.parametrize("sign", [
    "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
    "    torch.cuda.set_device(local_rank)",
    "[E1124 09:45:01.410000000 ProcessGroupNCCL.cpp:1484] [PG 0 Rank 1] Process group "
    "watchdog thread terminated",
    "CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:90: operation "
    "cuInit(0) failed: CUDA_ERROR_NOT_INITIALIZED",
    "ERROR:root:could not load the dataset shard 3",
    "the tokenizer step ended: exit status 3",
    "Fatal Python error: Aborted",
])
def test_a_failure_no_rule_knows_is_not_called_healthy(
    sign: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut traceback, torch's error-level log line, a logger's ERROR: the log failed, even
    if no rule and no 'Error: ' line says how. It is shown, and the exit status says so."""
    (tmp_path / "train.log").write_text(f"step 1 loss 2.0\n{sign}\n")
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("No known cause matched these logs.\nEarliest error lines:\n"), out
    assert sign.splitlines()[0][:60] in out


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


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("distrun diagnose: error: ") and says in captured.err
    assert len(captured.err.splitlines()) == 1 and "fix: " in captured.err


def test_fifo_is_refused_without_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)  # nobody writes: reading it would block forever
    one_line_error(capsys, [str(fifo)], "is not a regular file")


def test_dev_zero_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    one_line_error(capsys, ["/dev/zero"], "/dev/zero is not a regular file")


def test_directory_without_logs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 10)
    one_line_error(capsys, [str(tmp_path)], "holds no log files")


def test_binary_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blob = tmp_path / "core.log"
    blob.write_bytes(bytes(range(256)) * 100)
    one_line_error(capsys, [str(blob)], "is binary")


def test_non_utf8_text_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "latin1.log"
    log.write_bytes("d\xe9j\xe0 vu\nRuntimeError: CUDA out of memory.\n".encode("latin-1"))
    assert main([str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["causes"][0]["id"] == "cuda-out-of-memory"


def test_utf16_log_from_powershell_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "train.log"
    log.write_bytes("step 1\r\nRuntimeError: Address already in use\r\n".encode("utf-16"))
    assert main([str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["causes"][0]["id"] == "address-in-use"


def test_evidence_lines_are_capped_in_both_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "huge.log"
    log.write_text("RuntimeError: CUDA out of memory. " + "x" * 2_000_000 + "\n")
    assert main([str(log), "--json"]) == 0
    text = json.loads(capsys.readouterr().out)["causes"][0]["evidence"][0]["text"]
    assert len(text) == 500 and text.endswith("...")
    assert main([str(log)]) == 0
    out = capsys.readouterr().out
    assert len(out) < 5000 and "x" * 400 + "..." in out


def test_confidence_in_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    case = str(CORPUS / "collective" / "watchdog-all-ranks.log")
    assert main([case, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "cause" and data["confidence"] == "medium"
    assert data["causes"][0]["confidence"] == "medium"
    assert "only consequences" in data["causes"][0]["note"]
    assert main([case]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Only consequences found (the root cause is not in these logs): ")
    assert "confidence: medium" in out and "note: only consequences" in out


@pytest.mark.parametrize("at_end", [False, True], ids=["error-first", "error-last"])
def test_single_300_mb_line_stays_in_bounded_memory(tmp_path: Path, at_end: bool) -> None:
    """A 300 MB log with no newline: the process stays far below 1 GB and ends quickly, and
    the error is found at either end of the line (the middle is skipped)."""
    log = tmp_path / "one-line.log"
    error = b"RuntimeError: CUDA out of memory. "
    with log.open("wb") as out:
        out.write(b"" if at_end else error)
        block = b"y" * (1 << 20)
        for _ in range(300):
            out.write(block)
        out.write(b" " + error if at_end else b"")
    probe = (
        "import resource, sys; from distrun.cli.diagnose import main; code = main(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, code)"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", probe, str(log), "--json"], capture_output=True,
                          text=True, env=env, check=False, timeout=120)
    peak_kib, code = done.stdout.strip().splitlines()[-1].split()
    assert code == "0"
    # a whole-line read would hold the 300 MB line at least twice (bytes and text); a cold
    # Hyperscan database compile alone can reach ~400 MB on this machine
    assert int(peak_kib) < 512 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"
    assert '"cuda-out-of-memory"' in done.stdout


@pytest.mark.parametrize(("redraws", "lines_before"), [(20_000, 10), (150_000, 300_000)],
                         ids=["small-file", "line-across-chunks"])
def test_an_error_after_a_long_progress_bar_on_the_same_line_is_found(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], redraws: int, lines_before: int) -> None:
    """tqdm redraws with carriage returns and no newline: a crash printed right after it ends
    a line of megabytes; what the terminal showed last (the error) is that line's end."""
    log = tmp_path / "train.log"
    bar = "".join(f"Epoch 1: {k % 100}%|#####     | {k}/10000 [00:10<00:12, 9.1it/s]\r"
                  for k in range(redraws))
    log.write_text("".join(f"step {k} loss 0.25\n" for k in range(lines_before)) + bar
                   + "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                   + "step 1 loss 0.25\n", encoding="utf-8")
    assert len(bar) > MAX_LINE
    assert main([str(log)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Root cause: Device out of memory") and f"{log}:{lines_before + 1}" in out


@pytest.mark.parametrize("flags", [[], ["--json"]], ids=["text", "json"])
def test_a_reader_that_leaves_early_gets_no_traceback(flags: list[str]) -> None:
    """``distrun diagnose LOG | head``: the reader closes the pipe; distrun stops quietly with
    141 (128 + SIGPIPE), like a shell tool, instead of printing a BrokenPipeError traceback."""
    case = str(CORPUS / "collective" / "watchdog-all-ranks.log")
    entry = "import sys; from distrun.cli.main import entry; sys.argv[0] = 'distrun'; entry()"
    proc = subprocess.Popen([sys.executable, "-c", entry, "diagnose", case, *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(SRC)})
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first write
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


def test_a_capped_rule_says_why_it_is_not_sure(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "job.log"
    log.write_text("[rank1]: Traceback (most recent call last):\n"
                   "[rank1]:   File \"/home/u/train.py\", line 3, in <module>\n"
                   "[rank1]: ModuleNotFoundError: No module named 'flash_attn'\n", encoding="utf-8")
    assert main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "[python-module-missing]" in out and "where: rank 1" in out
    assert "confidence: medium (this error is not always the cause of a failure" in out
    assert "unrecognised errors came first" not in out
