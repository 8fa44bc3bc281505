"""Every corpus case against its label: development and held-out accuracy, printed.

The corpus is split by source repository (``split = "dev" | "heldout"`` in
labels.toml; no split = "dev"). Rules are written from the development half
only; the held-out half measures how the engine does on logs nobody fitted it
to. Printed (``pytest -s`` or on failure): accuracy per half, the
confident-wrong rate (high-confidence verdicts that are wrong, over the held-out
cases) and accuracy per expected rule. Fails when held-out accuracy falls below
the floor ``HELDOUT_MIN_ACCURACY`` once the held-out half has 30 cases or more,
or when a development case that passed before the split existed (no split key)
regresses. The goal of issue 12 is 90 % held-out; the floor is the level reached
so far (docs/diagnose.md), raised as the engine improves; lowered only when new held-out
cases come in (never by a rule change), and docs/diagnose.md says so.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from distrun.diagnose import Diagnosis, default_rules, diagnose

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = Path(__file__).parent / "corpus"
# labels.toml, plus labels-<part>.toml files that corpus contributors add alongside it.
LABELS: dict[str, dict[str, object]] = {
    case: label
    for path in sorted(CORPUS.glob("labels*.toml"))
    for case, label in tomllib.loads(path.read_text("utf-8")).get("case", {}).items()
}
HELDOUT_MIN_CASES = 30
HELDOUT_GOAL = 0.90  # not reached yet: see docs/diagnose.md
# the floor: 266/299 = 89.0 % (session 9); 265/298 = 88.9 % since session 12 moved a right
# case out; 266/298 = 89.26 % in session 13 (goal 0.90); lowered to 286/325 = 88.0 % when
# session 15's blind-collected held-out cases came in (the 27 new: 20/27); to 290/331 = 87.6 %
# when session 16's came in (the 6 new: 4/6)
HELDOUT_MIN_ACCURACY = 0.876
# Rules with no public case: distrun's own stall record exists only in run directories
# distrun wrote (tested in test_engine.py).
NO_PUBLIC_CASE = {"distrun-stall"}


@dataclass(frozen=True)
class Outcome:
    case: str
    expected: str
    got: str
    rank: int | None
    confidence: str | None
    split: str

    @property
    def right(self) -> bool:
        label = LABELS[self.case]
        return self.got == self.expected and ("rank" not in label or self.rank == label["rank"])


def verdict(case: str) -> tuple[str, int | None]:
    return verdict_of(diagnose([CORPUS / case]))


def verdict_of(result: Diagnosis) -> tuple[str, int | None]:
    if result.causes:
        return result.causes[0].rule.id, result.causes[0].rank
    rank = result.unrecognised[0].rank if result.unrecognised else None
    return "", rank


@cache
def outcomes() -> tuple[Outcome, ...]:
    found = []
    for case, label in LABELS.items():
        result = diagnose([CORPUS / case])
        rule, rank = verdict_of(result)
        found.append(Outcome(case, label["rule"], rule, rank, result.confidence,
                             label.get("split", "dev")))
    return tuple(found)


def wilson(right: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a share ``right/total`` (95 % for z = 1.96): how far
    the accuracy measured on this many cases may be from the accuracy on logs like them."""
    if total == 0:
        return 0.0, 1.0
    share, spread = right / total, z * z / total
    centre = (share + spread / 2) / (1 + spread)
    half = z * (share * (1 - share) / total + spread / (4 * total)) ** 0.5 / (1 + spread)
    return centre - half, centre + half


def test_the_interval_is_wilsons() -> None:
    # Wilson 1927; e.g. 81/263 -> [0.2553, 0.3662] (Newcombe 1998, Stat Med 17:857, table I)
    assert [round(x, 4) for x in wilson(81, 263)] == [0.2553, 0.3662]
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(10, 10)
    assert high == pytest.approx(1.0) and 0.72 < low < 0.73


def report(results: tuple[Outcome, ...]) -> str:
    lines = []
    for split in ("dev", "heldout"):
        part = [o for o in results if o.split == split]
        right = sum(o.right for o in part)
        share = right / len(part) if part else 0.0
        low, high = wilson(right, len(part))
        lines.append(f"diagnose corpus {split}: {right}/{len(part)} = {share:.1%} "
                     f"(95 % interval {low:.1%} to {high:.1%})")
    held = [o for o in results if o.split == "heldout"]
    bad = sum(1 for o in held if o.confidence == "high" and not o.right)
    rate = bad / len(held) if held else 0.0
    lines.append(f"diagnose corpus heldout confident-wrong: {bad}/{len(held)} = {rate:.1%}")
    lines.append("per expected rule (dev right/total, heldout right/total):")
    totals: dict[tuple[str, str], Counter[bool]] = {}
    for o in results:
        totals.setdefault((o.expected or "(no known cause)", o.split), Counter())[o.right] += 1
    for rule in sorted({r for r, _ in totals}):
        dev = totals.get((rule, "dev"), Counter())
        hel = totals.get((rule, "heldout"), Counter())
        lines.append(f"  {rule:32} {dev[True]}/{dev.total()}   {hel[True]}/{hel.total()}")
    # Held-out misses are counted above, never listed: naming them would let rules be fitted
    # to the held-out half.
    misses = [o for o in results if not o.right and o.split == "dev"]
    lines.extend(f"  miss [{o.split}] {o.case}: got {o.got or 'no known cause'} rank {o.rank} "
                 f"({o.confidence}), expected {o.expected or 'no known cause'}" for o in misses)
    return "\n".join(lines)


def test_corpus_accuracy() -> None:
    results = outcomes()
    print("\n" + report(results))
    legacy = [o for o in results if "split" not in LABELS[o.case] and not o.right]
    assert not legacy, "\n".join(f"{o.case}: got {o.got} rank {o.rank}" for o in legacy)
    held = [o for o in results if o.split == "heldout"]
    if len(held) >= HELDOUT_MIN_CASES:
        accuracy = sum(o.right for o in held) / len(held)
        assert accuracy >= HELDOUT_MIN_ACCURACY, report(results)


def test_every_case_is_labelled_and_every_label_has_a_file() -> None:
    files = {str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.log")}
    assert files == set(LABELS)


def test_every_label_has_a_source_and_a_valid_split() -> None:
    assert all(label.get("source") for label in LABELS.values())
    assert {label.get("split", "dev") for label in LABELS.values()} <= {"dev", "heldout"}


def test_one_repository_is_never_in_both_halves() -> None:
    halves: dict[str, set[str]] = {}
    for label in LABELS.values():
        if "repo" in label:
            halves.setdefault(label["repo"], set()).add(label.get("split", "dev"))
    assert not {repo for repo, seen in halves.items() if len(seen) > 1}


def test_every_label_names_a_rule() -> None:
    ids = {r.id for r in default_rules().rule} | {""}
    assert {label["rule"] for label in LABELS.values()} <= ids


@pytest.mark.parametrize("rule", [r.id for r in default_rules().rule if r.id not in NO_PUBLIC_CASE])
def test_every_rule_has_a_corpus_case(rule: str) -> None:
    assert any(label["rule"] == rule for label in LABELS.values())
