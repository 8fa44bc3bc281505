"""distrun estimate against DeepSpeed's and accelerate's own estimators (installed), and the CLI."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.cli.modelcount import measure
from distrun.errors import UsageError
from distrun.estimate.states import Setup, model_states, parse_count
from tests.conftest import REPO, run_cli
from tests.fuzz.harness import call_main

GIB = 2**30
pytestmark = pytest.mark.timeout(300)


def _printed(fn: object, *args: object) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        fn(*args)  # type: ignore[operator]
    return buf.getvalue()


def _gpu_gb(text: str, options: str) -> float:
    """The per-GPU column of the row of DeepSpeed's table with these options."""
    for line in text.splitlines():
        if line.strip().endswith(options):
            return float(line.split("|")[1].strip().removesuffix("GB"))
    raise AssertionError(f"no row {options!r} in:\n{text}")


def _close(ours: float, theirs: float, tol: float = 0.05) -> None:
    assert abs(ours - theirs) <= tol * theirs, (ours, theirs)


@pytest.mark.parametrize(("params", "per_node", "nodes"),
                         [(7e9, 8, 1), (7e9, 8, 2), (1.3e9, 1, 1), (70e9, 8, 4), (350e6, 4, 1)])
def test_zero2_matches_deepspeed_printed(params: float, per_node: int, nodes: int) -> None:
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs_all_cold,
    )

    text = _printed(estimate_zero2_model_states_mem_needs_all_cold, int(params), per_node, nodes)
    theirs = _gpu_gb(text, "offload_optimizer=none")
    ours = model_states(Setup(int(params), "adamw", "bf16", "zero2", per_node * nodes,
                              per_node)).total / GIB
    _close(ours, theirs)


@pytest.mark.parametrize(("params", "largest", "per_node", "nodes"),
                         [(7e9, 2e8, 8, 1), (7e9, 1e8, 8, 2), (70e9, 1e9, 8, 4), (1.3e9, 5e7, 2, 1)])
def test_zero3_matches_deepspeed_printed(params: float, largest: float, per_node: int,
                                         nodes: int) -> None:
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold

    text = _printed(estimate_zero3_model_states_mem_needs_all_cold, int(params), int(largest),
                    per_node, nodes)
    theirs = _gpu_gb(text, "offload_param=none, offload_optimizer=none, zero_init=1")
    ours = model_states(Setup(int(params), "adam", "fp16", "zero3", per_node * nodes, per_node,
                              int(largest))).total / GIB
    _close(ours, theirs)


def _real_model() -> object:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(*(torch.nn.Linear(2048, 2048) for _ in range(14)),
                               torch.nn.Linear(2048, 4096))


def test_all_live_variants_on_a_real_model() -> None:
    """DeepSpeed's *_all_live count the real module; so does our meta-free measure()."""
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_live
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs_all_live,
    )

    model = _real_model()
    counted = measure(model)
    assert counted.params == 15 * 2048 * 2048 + 14 * 2048 + 2048 * 4096 + 4096 - 2048 * 2048
    z2 = _gpu_gb(_printed(estimate_zero2_model_states_mem_needs_all_live, model, 2, 1),
                 "offload_optimizer=none")
    z3 = _gpu_gb(_printed(estimate_zero3_model_states_mem_needs_all_live, model, 2, 1),
                 "offload_param=none, offload_optimizer=none, zero_init=1")
    ours2 = model_states(Setup(counted.params, "adamw", "bf16", "zero2", 2, 2)).total / GIB
    ours3 = model_states(Setup(counted.params, "adamw", "bf16", "zero3", 2, 2,
                               counted.largest_layer)).total / GIB
    _close(ours2, z2)
    _close(ours3, z3)


def _accelerate_table(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    import accelerate.commands.estimate as est
    import torch

    def empty(*_: object, **__: object) -> torch.nn.Module:
        with torch.device("meta"):
            return torch.nn.Sequential(*(torch.nn.Linear(4096, 4096) for _ in range(40)))

    monkeypatch.setattr(est, "create_empty_model", empty)
    text = _printed(est.estimate_command, argparse.Namespace(
        model_name="local", library_name=None, trust_remote_code=False, dtypes=["float32"]))
    cells = [c.strip() for c in text.splitlines()[-2].split("│") if c.strip()]
    value, unit = cells[3].split()
    return {"fp32_adam": float(value) * {"GB": 1, "MB": 1 / 1024}[unit]}


def test_fp32_adam_matches_accelerate_estimate_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    with torch.device("meta"):
        counted = measure(torch.nn.Sequential(*(torch.nn.Linear(4096, 4096) for _ in range(40))))
    theirs = _accelerate_table(monkeypatch)["fp32_adam"]
    ours = model_states(Setup(counted.params, "adam", "fp32", "ddp")).total / GIB
    _close(ours, theirs)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_components_match_accelerate(precision: str) -> None:
    """accelerate's components for mixed precision (weights, grads 1.5x, Adam 2x) sum to ours.

    accelerate books the 16-bit copy under gradients, we under parameters (autocast's cast
    cache); the optimizer states and the sum agree."""
    from accelerate.commands.estimate import estimate_training_usage

    params = 1_000_000_000
    theirs = estimate_training_usage(4 * params, {"bf16": "bfloat16", "fp16": "float16"}[precision])
    ours = model_states(Setup(params, "adamw", precision, "ddp"))
    assert ours.params + ours.grads == theirs["model"] + theirs["gradients"]
    _close(ours.optimizer, theirs["optimizer"], 0.0)
    _close(ours.total, theirs["model"] + theirs["gradients"] + theirs["optimizer"])


@pytest.mark.parametrize(("text", "value"), [("7B", 7_000_000_000), ("350M", 350_000_000),
                                             ("1.3e9", 1_300_000_000), ("125k", 125_000)])
def test_parse_count(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["7X", "", "-3B", "0", "B"])
def test_parse_count_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--params"):
        parse_count(text)


def test_sharding_orders_memory() -> None:
    per = {s: model_states(Setup(7_000_000_000, "adamw", "bf16", s, 16, 8)).total
           for s in ("ddp", "zero1", "zero2", "zero3", "fsdp-hybrid", "fsdp-full")}
    assert per["ddp"] > per["zero1"] > per["zero2"] > per["zero3"]
    assert per["fsdp-hybrid"] == 2 * per["fsdp-full"]
    sgd = model_states(Setup(1000, "sgd", "fp32", "ddp"))
    assert (sgd.params, sgd.grads, sgd.optimizer) == (4000, 4000, 0)


def test_cli_json_and_fit(tmp_path: object) -> None:
    res = run_cli(["estimate", "--params", "7B", "--sharding", "ddp", "--inventory",
                   "1x8xH100-80GB", "--json"], REPO)
    assert res.returncode == 3, res.stderr
    out = json.loads(res.stdout)
    assert out["per_device_bytes"]["total"] == 18 * 7_000_000_000
    assert {d["fits"] for d in out["devices"]} == {False}
    ok = run_cli(["estimate", "--params", "7B", "--sharding", "zero3", "--inventory",
                  "2x8xH100-80GB"], REPO)
    assert ok.returncode == 0, ok.stderr
    assert "16 x H100-80GB (80 GiB): fits" in ok.stdout
    assert re.search(r"total\s+7\.33 GiB", ok.stdout)


def test_cli_model_file_built_on_meta(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "mymodel.py"
    path.write_text("import torch\n\ndef make_model():\n"
                    "    return torch.nn.Linear(100000, 100000)\n")  # 40 GB if really allocated
    res = run_cli(["estimate", "--model", str(path), "--optimizer", "sgd", "--precision", "fp32",
                   "--json"], REPO)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["setup"]["params"] == 100000 * 100000 + 100000


@pytest.mark.parametrize("argv", [["--params", "7X"], ["--params", "7B", "--sharding", "zero9"],
                                  ["--model", "/nonexistent/m.py"], ["--params", "1B", "--inventory",
                                                                     "2xfoo"]])
def test_cli_bad_input_one_line_exit_2(argv: list[str]) -> None:
    res = run_cli(["estimate", *argv], REPO)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("distrun estimate: error:")


def test_module_importable_without_torch_side_effects() -> None:
    code = "import sys, distrun.estimate; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    assert out.strip() == "False"


def test_cli_activations_make_it_not_fit() -> None:
    res = run_cli(["estimate", "--params", "7B", "--sharding", "zero3", "--inventory",
                   "1x8xA100-40GB", "--batch-size", "16", "--activation-bytes", "2GiB"], REPO)
    assert res.returncode == 3, res.stderr
    assert re.search(r"activations\s+32\.00 GiB", res.stdout)
    assert "8 x A100-40GB (40 GiB): does NOT fit" in res.stdout
    half = run_cli(["estimate", "--params", "7B", "--batch-size", "16"], REPO)
    assert half.returncode == 2 and "--activation-bytes" in half.stderr


def test_cli_model_factory_error_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("def make_model():\n    raise ValueError('needs a config')\n")
    res = run_cli(["estimate", "--model", f"{path}:make_model"], REPO)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "building it failed: ValueError: needs a config" in res.stderr


@pytest.mark.parametrize("body", ["raise RuntimeError('import fails')\n",
                                  "import sys\nsys.exit('usage: train.py CONFIG')\n"])
def test_cli_model_file_that_fails_on_import_is_one_line(tmp_path: Path, body: str) -> None:
    # a training script given as --model: its job starts (and fails) at import
    path = tmp_path / "train.py"
    path.write_text(body)
    res = run_cli(["estimate", "--model", str(path)], REPO)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and "importing it failed: " in res.stderr
    assert "if __name__ == '__main__'" in res.stderr


@pytest.mark.parametrize(("argv", "line"), [
    (["--params", "-7B"], "distrun estimate: error: --params '-7B' is not a parameter count; "
     "expected a number with an optional K/M/B/T suffix; fix: e.g. --params 7B or 350M\n"),
    (["--params", "1B", "--batch-size", "4", "--activation-bytes", "-24MiB"],
     "distrun estimate: error: --activation-bytes '-24MiB' is not a size; expected a number "
     "with B/KiB/MiB/GiB; fix: e.g. --activation-bytes 24MiB\n"),
    (["--model", "models"], "distrun estimate: error: --model 'models': models is a directory; "
     "expected FILE.py[:FACTORY] or MODULE[:FACTORY]; fix: pass the Python file that builds "
     "the model, e.g. --model models/model.py:make_model\n"),
    (["--model", "models/"], "distrun estimate: error: --model 'models/': models/ is a "
     "directory; expected FILE.py[:FACTORY] or MODULE[:FACTORY]; fix: pass the Python file "
     "that builds the model, e.g. --model models/model.py:make_model\n"),
])
def test_cli_negative_value_and_folder_are_named(tmp_path: Path, argv: list[str],
                                                 line: str) -> None:
    """'--params -7B' was argparse's 'expected one argument'; a folder for --model was 'has no
    make_model'."""
    (tmp_path / "models").mkdir()
    assert call_main(["estimate", *argv], tmp_path).check({2}).err == line


def test_cli_here_without_an_accelerator_says_so(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """--here on a CPU-only host printed nothing about devices."""
    from distrun.accelerators import detect

    probe_all = detect.detect
    monkeypatch.setattr(detect, "detect", lambda env=None: probe_all(env, probes={}))  # CPU
    done = call_main(["estimate", "--params", "1B", "--nproc-per-node", "2", "--here"],
                     tmp_path).check({0})
    note = done.out.splitlines()[-1]
    assert note.startswith("  info: no accelerator on this host: the per-device memory check "
                           "of --here is skipped; on CPU the 2 process(es) per node share this "
                           "host's "), note
    assert re.search(r"GiB of free memory, and need 33\.5 GiB \(fix: run 'distrun estimate "
                     r"--here' on a node with the job's devices\)$", note), note
    declared = call_main(["estimate", "--params", "1B", "--inventory", "1x8xH100-80GB",
                          "--here", "--json"], tmp_path).check({0})
    found = json.loads(declared.out)["findings"]
    assert [f["id"] for f in found] == ["no-accelerator"]
    assert found[0]["message"] == ("no accelerator on this host: the per-device memory check "
                                   "of --here is skipped")
