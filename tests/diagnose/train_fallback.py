"""Rebuild ``src/distrun/diagnose/fallback.json`` from the DEVELOPMENT half of the corpus.

    PYTHONPATH=src python tests/diagnose/train_fallback.py          # write the model
    PYTHONPATH=src python tests/diagnose/train_fallback.py --cv     # threshold table

Honesty: ``dev_labels`` is the only code that reads ``labels*.toml``; it keeps the
development cases (``split = "dev"`` or none, as test_shapes.py and deveval do)
before anything else and nothing of the held-out half is read, stored or printed.

Each case's features are the lines the engine matched (captured from
``engine.decide``), with the learned fallback switched off so that the rules'
own verdict is seen. The build is deterministic: sorted inputs, rounded weights,
sorted JSON keys.

``--cv``: leave-one-repository-out cross-validation on the dev half (each case is
predicted by a model trained without any case of its repository), for a grid of
thresholds: on the cases the rules name no cause for, how many misses the guess
fixes, how many right "no known cause" it breaks, how many misses it guesses
wrong (low confidence); on the cases the rules answer, how often the guess
agrees, from all matched lines and from the unrecognised error lines alone.
"""

from __future__ import annotations

import json
import math
import sys
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any
from unittest import mock

from distrun.diagnose import engine, fallback
from distrun.diagnose.hit import Hit
from distrun.diagnose.rules import GENERIC_ERROR_ID

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests/diagnose/corpus"
MODEL = ROOT / "src/distrun/diagnose/fallback.json"
MIN_DF = 2  # a token must occur in two training cases
TOP_TOKENS = 300  # tokens kept per centroid
PARAMS = {"min_score": 0.2, "min_margin": 0.05, "min_tokens": 4}  # chosen by --cv


@dataclass(frozen=True)
class Sample:
    case: str
    label: str  # the rule id, "" for "no known cause"
    rank: int | None
    repo: str
    lines: tuple[tuple[str, str], ...]  # (rule id, "" for unrecognised; text)
    rules_said: str  # the rules' own verdict (rule id or "")
    rules_rank: int | None

    def counts(self, generic_only: bool = False) -> Counter[str]:
        kept = [(r, t) for r, t in self.lines if not generic_only or not r]
        return fallback.features(kept)

    @property
    def rules_right(self) -> bool:
        return self.rules_said == self.label


def dev_labels() -> dict[str, dict[str, Any]]:
    """The development cases' labels; held-out entries are dropped on reading."""
    labels: dict[str, dict[str, Any]] = {}
    for path in sorted(CORPUS.glob("labels*.toml")):
        cases = tomllib.loads(path.read_text("utf-8")).get("case", {})
        labels.update({c: v for c, v in cases.items() if v.get("split", "dev") == "dev"})
    return labels


def sample(case: str, label: dict[str, Any]) -> Sample:
    """Run the rules on one case and keep the lines they matched."""
    seen: list[list[Hit]] = []
    original = engine.decide

    def capture(hits: list[Hit], *args: Any, **kwargs: Any) -> engine.Diagnosis:
        seen.append(list(hits))
        return original(hits, *args, **kwargs)

    with mock.patch.object(engine, "decide", capture), \
            mock.patch.object(fallback, "guess", lambda *a, **k: None):
        result = engine.diagnose([CORPUS / case])
    hits = sorted(seen[0], key=Hit.key)
    lines = tuple(("" if h.rule_id == GENERIC_ERROR_ID else h.rule_id, h.text) for h in hits)
    said = result.causes[0].rule.id if result.causes else ""
    rank = result.causes[0].rank if result.causes else (
        result.unrecognised[0].rank if result.unrecognised else None)
    return Sample(case, str(label["rule"]), label.get("rank"), str(label.get("repo", "(none)")),
                  lines, said, rank)



def samples() -> list[Sample]:
    return [sample(case, label) for case, label in sorted(dev_labels().items())]


def build(train: Sequence[Sample], params: dict[str, float], generic_only: bool = False
          ) -> dict[str, Any]:
    """The model's JSON form, trained on ``train``."""
    counts = [s.counts(generic_only) for s in train]
    df = Counter(t for c in counts for t in c)
    n = len(train)
    idf = {t: round(math.log((n + 1) / (d + 1)) + 1.0, 4) for t, d in sorted(df.items())
           if d >= MIN_DF}
    sums: dict[str, Counter[str]] = defaultdict(Counter)
    for s, c in zip(train, counts, strict=True):
        sums[s.label].update(fallback.vector(c, idf))
    used: set[str] = set()
    centroids = {label: _unit_top(total, used) for label, total in sorted(sums.items())}
    return {"version": 1, "params": params, "trained_on": f"{n} development cases",
            "idf": {t: v for t, v in idf.items() if t in used}, "centroids": centroids}


def _unit_top(total: Counter[str], used: set[str]) -> dict[str, float]:
    top = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_TOKENS]
    norm = math.sqrt(sum(v * v for _, v in top)) or 1.0
    kept = {t: round(v / norm, 4) for t, v in sorted(top) if round(v / norm, 4) > 0}
    used.update(kept)
    return kept


def dump(model: dict[str, Any]) -> str:
    return json.dumps(model, sort_keys=True, separators=(",", ":")) + "\n"


# ---- cross-validation ------------------------------------------------------------


def loro_guesses(data: Sequence[Sample], generic_only: bool) -> list[fallback.Guess | None]:
    """Each case's raw guess by a model trained without its repository."""
    by_repo: dict[str, fallback.Model] = {}
    out: list[fallback.Guess | None] = []
    for s in data:
        if s.repo not in by_repo:
            train = [t for t in data if t.repo != s.repo]
            by_repo[s.repo] = fallback.from_json(build(train, PARAMS, generic_only))
        out.append(fallback.classify(s.counts(generic_only), by_repo[s.repo]))
    return out


def _right(s: Sample, g: fallback.Guess) -> bool:
    return g.rule_id == s.label and (s.rank is None or s.rules_rank == s.rank)


def tally(data: Sequence[Sample], guesses: Sequence[fallback.Guess | None],
          model: fallback.Model, generic: Sequence[fallback.Guess | None]) -> dict[str, int]:
    t: Counter[str] = Counter()
    for s, g, gg in zip(data, guesses, generic, strict=True):
        ok = fallback.accepted(g, model)
        if s.rules_said == "":
            kind = "none_ok" if s.label == "" else "miss"
            t[f"{kind}_n"] += 1
            if ok and g is not None:
                t["broken" if s.label == "" else ("fixed" if _right(s, g) else "miss_wrong")] += 1
        elif s.rules_right:
            t["answered_n"] += 1
            if ok and g is not None:
                t["agree_answered"] += 1
                t["agree_right"] += g.rule_id == s.label
            okg = fallback.accepted(gg, model)
            if okg and gg is not None:
                t["generic_answered"] += 1
                t["generic_right"] += gg.rule_id == s.label
    return dict(t)


def cv(data: Sequence[Sample]) -> None:
    guesses = loro_guesses(data, False)
    generic = loro_guesses(data, True)
    print("min_score min_margin min_tokens | misses fixed/wrong/n | no-cause broken/n |"
          " answered: agree/said/n | generic-only: right/said")
    for score, margin, toks in product((0.0, 0.1, 0.2, 0.3), (0.0, 0.02, 0.05, 0.1, 0.15),
                                        (2, 4, 6)):
        model = fallback.Model({}, {}, score, margin, toks)
        t = Counter(tally(data, guesses, model, generic))
        print(f"{score:9} {margin:10} {toks:10} | {t['fixed']:3}/{t['miss_wrong']:2}/{t['miss_n']:2}"
              f" | {t['broken']:3}/{t['none_ok_n']:2} | {t['agree_right']:3}/"
              f"{t['agree_answered']:3}/{t['answered_n']:3} | {t['generic_right']:3}/"
              f"{t['generic_answered']:3}")


def main(argv: Iterable[str]) -> None:
    data = samples()
    if "--cv" in argv:
        cv(data)
        return
    MODEL.write_text(dump(build(data, PARAMS)), "utf-8")
    print(f"wrote {MODEL} ({MODEL.stat().st_size} bytes, {len(data)} development cases)")


if __name__ == "__main__":
    main(sys.argv[1:])
