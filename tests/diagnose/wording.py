"""What a user sees for one short log: shared by the wording tests (test_wordings_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from distrun.diagnose import diagnose

NOISE = "step 10 loss 2.31\nstep 20 loss 2.17\n"  # training output before the message
Case = tuple[str, str | None, str | None, int | None]  # log text, rule, confidence, rank or None
Neighbour = tuple[str, str | None]  # log text, the rule it must read as (None: no known cause)


def verdict_of_text(tmp_path: Path, text: str) -> tuple[str | None, str | None, int | None]:
    """(rule id, confidence, rank) of the root cause of ``text`` written as one log; for
    "no known cause", (None, None, the rank of the earliest unrecognised error line)."""
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    result = diagnose([log])
    if not result.causes:
        return None, None, result.unrecognised[0].rank if result.unrecognised else None
    return result.causes[0].rule.id, result.confidence, result.causes[0].rank


def check_wording(tmp_path: Path, name: str, case: Case) -> None:
    """A (log text, rule, confidence, rank or None for any) case reads as that verdict."""
    text, rule, confidence, rank = case
    got_rule, got_confidence, got_rank = verdict_of_text(tmp_path, text)
    assert (got_rule, got_confidence) == (rule, confidence), name
    if rank is not None:
        assert got_rank == rank, name


def check_neighbour(tmp_path: Path, name: str, case: Neighbour) -> None:
    """A neighbouring category's (log text, rule or None) is not taken by another rule."""
    text, rule = case
    assert verdict_of_text(tmp_path, text)[0] == rule, name



def wording_tests(cases: dict[str, Case], negative: dict[str, Neighbour]
                  ) -> tuple[Callable[..., None], Callable[..., None]]:
    """The two tests of a wording file, one per case: each case reads as its verdict, and
    each neighbour is not taken. Assign them to ``test_...`` names in the file."""

    @pytest.mark.parametrize("name", sorted(cases))
    def names_the_rule(tmp_path: Path, name: str) -> None:
        check_wording(tmp_path, name, cases[name])

    @pytest.mark.parametrize("name", sorted(negative))
    def neighbour_is_not_taken(tmp_path: Path, name: str) -> None:
        check_neighbour(tmp_path, name, negative[name])

    return names_the_rule, neighbour_is_not_taken
