"""launcher.log is on the run's one clock (UTC, microseconds), whatever the time zone, so that
diagnose orders its lines against events.jsonl and the rank logs."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from distrun.diagnose.sources import parse_time
from distrun.launch.launcher import ELASTIC_LOGGER, log_to
from distrun.model.rundir import RunDir


def test_launcher_log_lines_are_utc_microseconds_in_any_time_zone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    handlers = log_to(RunDir(tmp_path / "run"))
    try:
        before = time.time()
        logging.getLogger(ELASTIC_LOGGER).info("Received 15 death signal, shutting down workers")
        after = time.time()
    finally:
        for handler in handlers:
            logging.getLogger(ELASTIC_LOGGER).removeHandler(handler)
            handler.close()
        monkeypatch.delenv("TZ")
        time.tzset()
    line = (tmp_path / "run" / "logs" / "launcher.log").read_text().splitlines()[-1]
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z INFO torch\.distributed\.elastic: "
                    r"Received 15", line), line
    when, rest = parse_time(line)
    assert when is not None and before - 1e-6 <= when <= after + 1e-6
    assert rest.startswith("INFO ")
