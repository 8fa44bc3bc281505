"""Every corpus case gets its expected verdict; the accuracy is printed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from distrun.diagnose import default_rules, diagnose

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = Path(__file__).parent / "corpus"
LABELS = tomllib.loads((CORPUS / "labels.toml").read_text("utf-8"))["case"]


def verdict(case: str) -> tuple[str, int | None]:
    result = diagnose([CORPUS / case])
    if result.causes:
        return result.causes[0].rule.id, result.causes[0].rank
    rank = result.unrecognised[0].rank if result.unrecognised else None
    return "", rank


def test_corpus_accuracy() -> None:
    wrong = []
    for case, label in LABELS.items():
        rule, rank = verdict(case)
        if rule != label["rule"] or ("rank" in label and rank != label["rank"]):
            wrong.append(f"{case}: got {rule or 'no known cause'} rank {rank}, expected {label}")
    right = len(LABELS) - len(wrong)
    print(f"\ndiagnose corpus accuracy: {right}/{len(LABELS)} = {right / len(LABELS):.1%}")
    assert not wrong, "\n".join(wrong)


def test_every_case_is_labelled_and_every_label_has_a_file() -> None:
    files = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.log")}
    assert files == set(LABELS)


def test_every_label_has_a_source() -> None:
    assert all(label.get("source") for label in LABELS.values())


@pytest.mark.parametrize("rule", [r.id for r in default_rules().rule])
def test_every_rule_has_a_corpus_case(rule: str) -> None:
    assert any(label["rule"] == rule for label in LABELS.values())
