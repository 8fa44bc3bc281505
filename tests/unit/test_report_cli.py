"""``distrun report``'s own command line: its advice names ``distrun report``, a page it cannot
write is named by the path the user gave (never a temporary file), and ``-o -`` is stdout."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.harness import call_main
from tests.unit.test_monitor_view import SUCCEEDED, write_run


def error_line(err: str) -> str:
    return next(x for x in err.splitlines() if ": error: " in x)


def test_report_with_no_run_directory_advises_distrun_report(tmp_path: Path) -> None:
    line = error_line(call_main(["report"], tmp_path).check({2}).err)
    assert line == ("distrun report: error: no run directory given and none under runs; fix: "
                    "pass the run directory: distrun report runs/<run>")


def test_no_run_directory_names_the_folder_searched(tmp_path: Path) -> None:
    result = call_main(["monitor", "--once"], tmp_path, {"DISTRUN_RUNS": str(tmp_path / "r")})
    assert (f"none under {tmp_path / 'r'}; fix: pass the run directory: distrun monitor "
            "runs/<run>") in error_line(result.check({2}).err)


def test_a_page_that_cannot_be_written_is_named_as_given(tmp_path: Path) -> None:
    run = write_run(tmp_path, SUCCEEDED)
    out = tmp_path / "missing" / "r.html"
    line = error_line(call_main(["report", str(run), "-o", str(out)], tmp_path).check({2}).err)
    assert line == (f"distrun report: error: cannot write the report to {out}: No such file or "
                    f"directory; fix: create the folder {out.parent} first, or pass -o with a "
                    "file in an existing folder")
    assert not out.parent.exists()


def test_a_folder_as_output_asks_for_a_file_name(tmp_path: Path) -> None:
    run = write_run(tmp_path, SUCCEEDED)
    line = error_line(call_main(["report", str(run), "-o", str(tmp_path)], tmp_path
                                ).check({2}).err)
    assert line.endswith(f"Is a directory; fix: pass -o with a file name, e.g. -o "
                         f"{tmp_path / 'report.html'}")


def test_dash_writes_the_page_to_stdout(tmp_path: Path) -> None:
    run = write_run(tmp_path, SUCCEEDED)
    result = call_main(["report", str(run), "-o", "-"], tmp_path).check({0})
    assert result.out.startswith("<!DOCTYPE html>") and result.out.endswith("</html>\n")
    assert '<table id="ranks">' in result.out and result.err == ""
    assert not (tmp_path / "-").exists() and not (run / "report.html").exists()
