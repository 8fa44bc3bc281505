"""Every format, whole text, against the committed golden files.

After an intended change: DISTRUN_UPDATE_GOLDEN=1 pytest tests/export, then review the diff.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from distrun.export import FORMATS, render
from tests.export.cases import CASES, EXTENSIONS

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("DISTRUN_UPDATE_GOLDEN") == "1"


def files_of(case: str, fmt: str) -> dict[Path, str]:
    make, options = CASES[case]
    out = render(fmt, make(), options)
    if isinstance(out, str):
        return {GOLDEN / f"{case}.{EXTENSIONS[fmt]}".replace(".yaml", f".{fmt}.yaml"): out}
    return {GOLDEN / f"{case}.shell" / name: text for name, text in out.items()}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("case", list(CASES))
def test_matches_golden(case: str, fmt: str) -> None:
    for path, text in files_of(case, fmt).items():
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"no golden file {path}: DISTRUN_UPDATE_GOLDEN=1 writes it"
        assert text == path.read_text(), f"{path.name} differs from the golden file"


def test_no_stray_golden_files() -> None:
    expected = {p for case in CASES for fmt in FORMATS for p in files_of(case, fmt)}
    found = {p for p in GOLDEN.rglob("*") if p.is_file()}
    assert found == expected


@pytest.mark.parametrize("case", list(CASES))
def test_scripts_parse_in_their_shell(case: str) -> None:
    """bash -n / sh -n: the scripts are valid shell, whatever the quoting produced."""
    scripts = {**files_of(case, "slurm"), **files_of(case, "shell")}
    for path, text in scripts.items():
        shell = "bash" if path.suffix == ".sbatch" else "sh"
        done = subprocess.run([shell, "-n"], input=text, capture_output=True, text=True,
                              timeout=10, check=False)
        assert done.returncode == 0, (path.name, done.stderr)
