"""Framework versions (package metadata, nothing imported) and their hazards on a node."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from distrun.accelerators.inventory import parse_declared
from distrun.checks import frameworks
from tests.conftest import run_cli

INSTALLED = {"mmengine": "0.10.7", "jax": "0.10.2", "transformers": None}


def ids(found: list[frameworks.Finding]) -> list[tuple[str, str]]:
    return [(f.id, f.severity) for f in found]


def test_versions_come_from_package_metadata_only() -> None:
    seen: list[str] = []
    got = frameworks.versions(lambda name: seen.append(name) or ("1.0" if name == "jax" else None))
    assert got["jax"] == "1.0" and got["mmengine"] is None and seen == list(frameworks.FRAMEWORKS)


def test_mmengine_on_gcu_points_at_the_integration() -> None:
    [mm, jax] = frameworks.findings(INSTALLED, parse_declared("1x8xgcu")[0], 8, {})
    assert (mm.id, mm.severity) == ("framework-mmengine-cuda-init", "warning")
    assert "MMEngine 0.10.7" in mm.message and "torch.cuda.set_device" in mm.message
    assert "distrun.integrations.mmengine.setup()" in mm.fix
    assert (jax.id, jax.severity) == ("framework-jax-preallocate", "info")


def test_mmengine_on_cuda_and_npu_is_fine_and_on_cpu_a_note() -> None:
    assert ids(frameworks.findings({"mmengine": "0.10.7"}, parse_declared("1x8xH100")[0], 8,
                                   {})) == []
    assert ids(frameworks.findings({"mmengine": "0.10.7"}, parse_declared("1x8xascend")[0], 8,
                                   {})) == []
    assert ids(frameworks.findings({"mmengine": "0.10.7"}, parse_declared("1x4xcpu")[0], 4,
                                   {})) == [("framework-mmengine-cuda-init", "info")]


def test_jax_processes_sharing_devices_are_warned_unless_the_variable_is_set() -> None:
    node = parse_declared("1x2xH100")[0]
    [shared] = frameworks.findings({"jax": "0.10.2"}, node, 4, {})
    assert shared.severity == "warning" and "4 processes on 2 cuda device(s)" in shared.message
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in shared.fix and "0.45" in shared.fix
    assert frameworks.findings({"jax": "0.10.2"}, node, 4,
                               {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".4"}) == []
    assert frameworks.findings({"jax": "0.10.2"}, parse_declared("1x8xcpu")[0], 8, {}) == []


def test_doctor_reports_installed_framework_versions(tmp_path: Path) -> None:
    try:
        mmengine = importlib.metadata.version("mmengine")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("mmengine is in requirements-test.txt")
    done = run_cli(["doctor", "--json"], tmp_path)
    data = json.loads(done.stdout)
    assert data["frameworks"]["mmengine"] == mmengine
    assert "framework-mmengine-cuda-init" in [f["id"] for f in data["findings"]]
    human = run_cli(["doctor"], tmp_path)
    assert f"mmengine {mmengine}" in human.stdout
