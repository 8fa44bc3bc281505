"""What a user sees for one short log: shared by the wording tests (test_wordings_*.py)."""

from __future__ import annotations

from pathlib import Path

from distrun.diagnose import diagnose


def verdict_of_text(tmp_path: Path, text: str) -> tuple[str | None, str | None, int | None]:
    """(rule id, confidence, rank) of the root cause of ``text`` written as one log; for
    "no known cause", (None, None, the rank of the earliest unrecognised error line)."""
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    result = diagnose([log])
    if not result.causes:
        return None, None, result.unrecognised[0].rank if result.unrecognised else None
    return result.causes[0].rule.id, result.confidence, result.causes[0].rank


def check_wording(tmp_path: Path, name: str,
                  case: tuple[str, str | None, str | None, int | None]) -> None:
    """A (log text, rule, confidence, rank or None for any) case reads as that verdict."""
    text, rule, confidence, rank = case
    got_rule, got_confidence, got_rank = verdict_of_text(tmp_path, text)
    assert (got_rule, got_confidence) == (rule, confidence), name
    if rank is not None:
        assert got_rank == rank, name


def check_neighbour(tmp_path: Path, name: str, case: tuple[str, str | None]) -> None:
    """A neighbouring category's (log text, rule or None) is not taken by another rule."""
    text, rule = case
    assert verdict_of_text(tmp_path, text)[0] == rule, name
