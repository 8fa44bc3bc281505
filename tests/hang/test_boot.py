"""The boot sitecustomize in plain interpreters: silent and inert where not asked for, one
warning line (never a stop, never a changed exit status) where it cannot work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distrun.instrument import BOOT_DIR, worker_env

pytestmark = pytest.mark.timeout(60)
SRC = str(Path(__file__).resolve().parents[2] / "src")


def python(code: str, path: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DISTRUN_")
            and k not in ("RANK", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=50, check=False,
                          env={**base, "PYTHONPATH": os.pathsep.join(path), **env})


def test_inert_without_the_variables_and_torch_not_imported() -> None:
    done = python("import sys; print('torch' in sys.modules); sys.exit(3)", [BOOT_DIR, SRC])
    assert (done.returncode, done.stdout, done.stderr) == (3, "False\n", "")


def test_active_rank_imports_no_torch_at_start(tmp_path: Path) -> None:
    code = ("import sys, os; print('torch' in sys.modules, os.environ['DISTRUN_INSTRUMENT_PID']"
            " == str(os.getpid())); sys.exit(5)")
    done = python(code, [BOOT_DIR, SRC], DISTRUN_INSTRUMENT="1", RANK="0",
                  DISTRUN_RUN_DIR=str(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (5, "False True\n", "")


def test_distrun_missing_is_one_warning_line_and_the_script_runs(tmp_path: Path) -> None:
    # a worker environment where distrun does not import (an editable or site install would
    # otherwise answer): a package of that name that fails, first on the path
    missing = tmp_path / "missing" / "distrun"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text("raise ImportError('No module named distrun')\n")
    done = python("print('script ran'); raise SystemExit(7)", [BOOT_DIR, str(missing.parent)],
                  DISTRUN_INSTRUMENT="1", RANK="0", DISTRUN_RUN_DIR=str(tmp_path))
    assert done.returncode == 7 and done.stdout == "script ran\n"
    assert done.stderr.startswith("distrun: instrument: off in this process (")
    assert len(done.stderr.splitlines()) == 1


def test_the_shadowed_sitecustomize_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("print('theirs ran')\n")
    done = python("print('script')", [BOOT_DIR, SRC, str(tmp_path)])
    assert done.stdout == "theirs ran\nscript\n" and done.stderr == ""


def test_worker_env_puts_the_boot_dir_first_once() -> None:
    env = worker_env({"PYTHONPATH": f"/a{os.pathsep}{BOOT_DIR}{os.pathsep}/b"})
    assert env == {"DISTRUN_INSTRUMENT": "1",
                   "PYTHONPATH": os.pathsep.join([BOOT_DIR, "/a", "/b"])}


def test_a_forked_child_leaving_does_not_mark_the_rank_exited(tmp_path: Path) -> None:
    code = ("import os, sys, torch.distributed as dist\n"
            "os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='0', WORLD_SIZE='1')\n"
            "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    sys.exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "path = os.path.join(os.environ['DISTRUN_RUN_DIR'], 'progress', 'rank-0.json')\n"
            "print(open(path).read().count('\"exited_at\":null'))\n")
    done = python(code, [BOOT_DIR, SRC], DISTRUN_INSTRUMENT="1", RANK="0",
                  DISTRUN_RUN_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"
