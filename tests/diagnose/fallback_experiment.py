"""Would a learned, low-confidence fallback help `distrun diagnose`? (issue 12 experiment)

    PYTHONPATH=src python tests/diagnose/fallback_experiment.py

A negative result, kept so it can be re-run when the corpus grows. The idea: when
the rules name no cause, guess the category from the words of the error lines with
a classifier trained on past cases, and report the guess with confidence "low"
(never confidently wrong). The classifier: TF-IDF nearest centroid (sublinear tf,
cosine; a token must occur in two training cases) over lowercased words, numbers,
hex and directories dropped. It answers only when the best class scores at least
``min_score``, beats the runner-up by ``min_margin`` and at least 4 known tokens
were seen; a ``""`` class (logs whose cause is not a distributed one) never answers.

Honesty: ``dev_labels`` is the only code that reads ``labels*.toml``; it keeps the
development cases (``split = "dev"`` or none, as test_shapes.py and deveval do)
before anything else; only development logs are opened; nothing of the held-out
half is read, stored or printed.

Leave-one-REPOSITORY-out cross-validation on the dev half: every case is predicted
by a model trained without any case of its repository. Measured:

* consulted: the cases the rules name no cause for (the only ones the fallback would
  see): misses the guess fixes / misses it guesses wrong (low) / right "no known
  cause" verdicts it breaks;
* answered (sanity): the cases the rules get right; ``agree``: the guess from all the
  lines agrees with the rule; ``masked``: the guess once the lines a rule matched are
  removed (what the fallback would see had the rules not known that wording).

Feature sets: ``hits``: the lines the engine matched (unrecognised "Error: "/
"Exception: " lines, plus a ``rule:<id>`` token and the text of every rule wording
that made no verdict); ``raw``: every line of the log with an error-ish word
(error, fail, warn, exception, abort, timeout, killed, refused, ...); ``both``.
``-sec``: the consequence-only (secondary) rules may not be answered.
"""

from __future__ import annotations

import math
import re
import sys
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from distrun.diagnose import default_rules, engine
from distrun.diagnose.hit import Hit
from distrun.diagnose.rules import GENERIC_ERROR_ID

CORPUS = Path(__file__).resolve().parent / "corpus"
MIN_DF = 2
MIN_TOKENS = 4
MAX_LINES = 400
THRESHOLDS = ((0.0, 0.02), (0.2, 0.05), (0.2, 0.1), (0.3, 0.15), (0.3, 0.2))
_HEX = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-fA-F]{8,}\b")
_DIRS = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]*)+[/\\]")
_WORD = re.compile(r"[a-z][a-z0-9_]*[a-z0-9]")
_ERRISH = re.compile(r"error|fail|warn|exception|abort|timeout|timed out|killed|denied|refused"
                     r"|cannot|unable|invalid|not found|no such|fatal|panic|traceback", re.I)

Lines = list[tuple[str, str]]  # (rule id, "" when unrecognised or raw; text)


@dataclass(frozen=True)
class Case:
    name: str
    label: str  # rule id; "" for "no known cause"
    repo: str
    hits: tuple[tuple[str, str], ...]
    raw: tuple[str, ...]
    said: str  # the rules' verdict


@dataclass(frozen=True)
class Guess:
    label: str
    score: float
    margin: float
    known: int


def dev_labels() -> dict[str, dict[str, Any]]:
    """The development cases' labels; held-out entries are dropped on reading."""
    labels: dict[str, dict[str, Any]] = {}
    for path in sorted(CORPUS.glob("labels*.toml")):
        cases = tomllib.loads(path.read_text("utf-8")).get("case", {})
        labels.update({c: v for c, v in cases.items() if v.get("split", "dev") == "dev"})
    return labels


def tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(_DIRS.sub(" ", _HEX.sub(" ", text)).lower()) if len(t) >= 3]


def features(lines: Iterable[tuple[str, str]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for rule_id, text in lines:
        counts.update(tokens(text))
        if rule_id:
            counts[f"rule:{rule_id}"] += 1
    return counts


def load_case(name: str, label: Mapping[str, Any]) -> Case:
    """The rules' verdict and matched lines (fallback off: the rules alone) and raw lines."""
    seen: list[list[Hit]] = []
    original = engine.decide

    def capture(hits: list[Hit], *args: Any, **kwargs: Any) -> engine.Diagnosis:
        seen.append(list(hits))
        return original(hits, *args, **kwargs)

    with mock.patch.object(engine, "decide", capture):
        result = engine.diagnose([CORPUS / name])
    hits = tuple(("" if h.rule_id == GENERIC_ERROR_ID else h.rule_id, h.text)
                 for h in sorted(seen[0], key=Hit.key))
    text = (CORPUS / name).read_text("utf-8", errors="replace")
    raw = tuple(line[:500] for line in text.splitlines() if _ERRISH.search(line))[:MAX_LINES]
    said = result.causes[0].rule.id if result.causes else ""
    return Case(name, str(label["rule"]), str(label.get("repo", "(none)")), hits, raw, said)


def lines_of(case: Case, kind: str, masked: bool = False) -> Lines:
    ruled = [t for r, t in case.hits if r and len(t) > 12]
    hits = [(r, t) for r, t in case.hits if not (masked and r)]
    raw = [("", line) for line in case.raw
           if not (masked and any(t in line or line.strip() in t for t in ruled))]
    return {"hits": hits, "raw": raw, "both": hits + raw}[kind]


@dataclass(frozen=True)
class Model:
    idf: dict[str, float]
    centroids: dict[str, dict[str, float]]


def vector(counts: Mapping[str, int], idf: Mapping[str, float]) -> dict[str, float]:
    vec = {t: (1.0 + math.log(n)) * idf[t] for t, n in counts.items() if t in idf}
    norm = math.sqrt(sum(v * v for v in vec.values()))
    return {t: v / norm for t, v in vec.items()} if norm else {}


def train(data: Sequence[tuple[Counter[str], str]]) -> Model:
    df = Counter(t for counts, _ in data for t in counts)
    idf = {t: math.log((len(data) + 1) / (d + 1)) + 1.0 for t, d in df.items() if d >= MIN_DF}
    sums: dict[str, Counter[str]] = defaultdict(Counter)
    for counts, label in data:
        sums[label].update(vector(counts, idf))
    return Model(idf, {label: _unit(total) for label, total in sums.items()})


def _unit(total: Mapping[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(v * v for v in total.values())) or 1.0
    return {t: v / norm for t, v in total.items()}


def classify(counts: Mapping[str, int], model: Model, barred: set[str]) -> Guess | None:
    vec = vector(counts, model.idf)
    scores = sorted(((sum(w * c.get(t, 0.0) for t, w in vec.items()), label)
                     for label, c in model.centroids.items() if label not in barred),
                    key=lambda s: (-s[0], s[1]))
    if not vec or not scores:
        return None
    second = scores[1][0] if len(scores) > 1 else 0.0
    return Guess(scores[0][1], scores[0][0], scores[0][0] - second, len(vec))


def answers(guess: Guess | None, min_score: float, min_margin: float) -> str:
    """The label answered, or "" (abstain)."""
    if guess is None or guess.known < MIN_TOKENS:
        return ""
    return guess.label if guess.score >= min_score and guess.margin >= min_margin else ""


def loro(cases: Sequence[Case], kind: str, barred: set[str]
         ) -> list[tuple[Guess | None, Guess | None]]:
    """Each case's (guess from all its lines, guess with the rule-matched lines masked)."""
    models: dict[str, Model] = {}
    out = []
    for case in cases:
        if case.repo not in models:
            models[case.repo] = train([(features(lines_of(c, kind)), c.label)
                                       for c in cases if c.repo != case.repo])
        model = models[case.repo]
        out.append((classify(features(lines_of(case, kind)), model, barred),
                    classify(features(lines_of(case, kind, True)), model, barred)))
    return out


def tally(cases: Sequence[Case], guesses: Sequence[tuple[Guess | None, Guess | None]],
          min_score: float, min_margin: float) -> Counter[str]:
    t: Counter[str] = Counter()
    for case, (full, masked) in zip(cases, guesses, strict=True):
        said, said_masked = answers(full, min_score, min_margin), answers(masked, min_score,
                                                                            min_margin)
        if case.said == "":
            t["nocause_n" if case.label == "" else "miss_n"] += 1
            if said:
                t["broken" if case.label == "" else
                  ("fixed" if said == case.label else "miss_wrong")] += 1
        elif case.said == case.label:
            t["answered_n"] += 1
            t["agree"] += said == case.label
            t["masked_said"] += bool(said_masked)
            t["masked_right"] += said_masked == case.label
    return t


def report(cases: Sequence[Case]) -> None:
    secondary = {r.id for r in default_rules().rule if r.kind == "secondary"}
    print("features   score margin | misses fixed/wrong-low/n | no-cause broken/n |"
          " answered agree/n | masked right/said")
    for kind in ("hits", "raw", "both"):
        for name, barred in ((kind, set()), (f"{kind}-sec", secondary)):
            guesses = loro(cases, kind, barred)
            for score, margin in THRESHOLDS:
                t = tally(cases, guesses, score, margin)
                print(f"{name:10} {score:5} {margin:6} | {t['fixed']:5}/{t['miss_wrong']:2}/"
                      f"{t['miss_n']:2}           | {t['broken']:6}/{t['nocause_n']:2}         |"
                      f" {t['agree']:8}/{t['answered_n']:3} | {t['masked_right']:5}/"
                      f"{t['masked_said']:3}")


def main() -> None:
    cases = [load_case(name, label) for name, label in sorted(dev_labels().items())]
    report(cases)


if __name__ == "__main__":
    sys.exit(main())
