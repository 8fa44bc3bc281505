"""A learned, low-confidence guess for logs no rule explains.

Consulted only when the rules name no cause. The model (``fallback.json``, rebuilt
by ``tests/diagnose/train_fallback.py`` from the development half of the corpus)
is a TF-IDF nearest-centroid classifier over the words of the lines the engine
matched: the unrecognised error lines and any rule wording that did not make a
verdict (a ``rule:<id>`` token each). It answers only when the best category
clearly beats the runner-up and enough known words were seen; otherwise it
abstains and the verdict stays "no known cause". Its answer is always a guess:
the engine reports it with confidence ``low``.

Importing this module costs nothing: the model is read on the first guess.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MODEL_PATH = Path(__file__).with_name("fallback.json")
NONE_CLASS = ""  # trained on logs whose cause is not a distributed one: never answered

_HEX = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-fA-F]{8,}\b")
_DIRS = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]*)+[/\\]")
_WORD = re.compile(r"[a-z][a-z0-9_]*[a-z0-9]|[a-z]")


@dataclass(frozen=True)
class Guess:
    """The category the lines look like: its rule id, cosine score and lead over the next."""

    rule_id: str
    score: float
    margin: float
    known_tokens: int


@dataclass(frozen=True)
class Model:
    """Inverse document frequencies, one unit centroid per class, the abstention thresholds."""

    idf: Mapping[str, float]
    centroids: Mapping[str, Mapping[str, float]]
    min_score: float
    min_margin: float
    min_tokens: int


def tokens(text: str) -> list[str]:
    """The words of a line: lowercased; numbers, hex, addresses and directories dropped."""
    text = _DIRS.sub(" ", _HEX.sub(" ", text)).lower()
    return [t for t in _WORD.findall(text) if len(t) >= 3]


def features(lines: Iterable[tuple[str, str]]) -> Counter[str]:
    """Token counts of ``(rule_id, text)`` lines; a matched rule adds ``rule:<id>``."""
    counts: Counter[str] = Counter()
    for rule_id, text in lines:
        counts.update(tokens(text))
        if rule_id:
            counts[f"rule:{rule_id}"] += 1
    return counts


def vector(counts: Mapping[str, int], idf: Mapping[str, float]) -> dict[str, float]:
    """Unit TF-IDF vector (sublinear tf) over the tokens the model knows."""
    vec = {t: (1.0 + math.log(n)) * idf[t] for t, n in counts.items() if t in idf}
    norm = math.sqrt(sum(v * v for v in vec.values()))
    return {t: v / norm for t, v in vec.items()} if norm else {}


def ranked(vec: Mapping[str, float],
           centroids: Mapping[str, Mapping[str, float]]) -> list[tuple[float, str]]:
    """Cosine score of every class, best first (ties by class name)."""
    scores = [(sum(w * c.get(t, 0.0) for t, w in vec.items()), name)
              for name, c in centroids.items()]
    return sorted(scores, key=lambda s: (-s[0], s[1]))


def classify(counts: Mapping[str, int], model: Model) -> Guess | None:
    """The best class and its lead, or None when no known token was seen."""
    vec = vector(counts, model.idf)
    best = ranked(vec, model.centroids) if vec else []
    if not best:
        return None
    runner_up = best[1][0] if len(best) > 1 else 0.0
    return Guess(best[0][1], best[0][0], best[0][0] - runner_up, len(vec))


def accepted(guess: Guess | None, model: Model) -> bool:
    """Answer only a clear, well-supported guess of a real cause."""
    return (guess is not None and guess.rule_id != NONE_CLASS
            and guess.score >= model.min_score and guess.margin >= model.min_margin
            and guess.known_tokens >= model.min_tokens)


def guess(lines: Iterable[tuple[str, str]], model: Model | None = None) -> Guess | None:
    """The guessed cause of ``(rule_id, text)`` lines, or None (abstain)."""
    used = model or default_model()
    found = classify(features(lines), used)
    return found if accepted(found, used) else None


def from_json(data: Mapping[str, Any]) -> Model:
    """A model from its JSON form (see ``train_fallback.py``)."""
    params = data["params"]
    return Model(idf=data["idf"], centroids=data["centroids"],
                 min_score=float(params["min_score"]), min_margin=float(params["min_margin"]),
                 min_tokens=int(params["min_tokens"]))


@cache
def default_model() -> Model:
    """The shipped model, read once on first use."""
    return from_json(json.loads(MODEL_PATH.read_text("utf-8")))
