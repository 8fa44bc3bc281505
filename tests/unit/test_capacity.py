"""More processes than cores or devices: one warning naming both numbers."""

from __future__ import annotations

from pathlib import Path

from distrun.accelerators.inventory import parse_declared
from distrun.checks.capacity import capacity_findings, usable_cpus
from distrun.checks.preflight import checked_plan
from distrun.model.plan import Request
from distrun.plan import build
from tests.conftest import run_cli


def test_cpu_oversubscription_warns_with_the_numbers() -> None:
    plan = build(Request(script="t.py", nproc_per_node="8"), parse_declared("1x2xcpu"))
    found = capacity_findings(plan, cpus=2)
    assert [(f.id, f.severity) for f in found] == [("oversubscribed-cpus", "warning")]
    assert "plans 8 processes on 2 usable CPU core(s)" in found[0].message
    assert "--nproc-per-node 2" in found[0].fix
    assert capacity_findings(plan, cpus=8) == [] and capacity_findings(plan, cpus=None) == []


def test_devices_are_left_to_the_planner_finding() -> None:
    plan = checked_plan(Request(script="t.py", nproc_per_node="4"), parse_declared("1x2xH100"))
    assert "nproc-exceeds-devices" in [f.id for f in plan.findings]
    assert capacity_findings(plan, cpus=1) == []  # not said twice


def test_usable_cpus_is_positive() -> None:
    assert (usable_cpus() or 1) >= 1


def test_plan_warns_when_a_cpu_job_plans_more_processes_than_cores(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n", encoding="utf-8")
    many = (usable_cpus() or 1) * 4
    done = run_cli(["plan", "--nproc-per-node", str(many), "train.py"], cwd=tmp_path,
                   env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr
    assert "oversubscribed-cpus" in done.stdout + done.stderr
    assert f"plans {many} processes" in done.stdout + done.stderr
