"""The diagnose rule set: load ``rules.toml``, validate it, and derive matchers.

Rules are data (``rules.toml`` next to this module). Each pattern is written in
the subset of regular expressions that Python's ``re`` and POSIX ``grep -E``
read the same way, so the benchmark can hand the very same patterns to grep.

Besides the full patterns, every pattern yields one *key*: a literal substring
that every match of the pattern contains (like grep's "must" strings). The
engine first looks for keys over whole chunks of a file, then runs the combined
full pattern only on the lines that hold a key.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

GENERIC_ERROR_ID = "unrecognised-error"
RANK_CONTEXT_ID = "rank-context"

# Lines that look like an error but match no rule: the "no known cause" evidence.
GENERIC_ERROR_PATTERNS = ("Error: ", "Exception: ", "Segmentation fault")
# torchelastic's failure summary names the rank on its own line before the cause.
RANK_CONTEXT_PATTERNS = ("  rank      : [0-9]+ \\(local_rank",)

_FORBIDDEN = ("(?", "\\d", "\\s", "\\w", "\\b", "*?", "+?", "??")
_MIN_KEY = 4
_MAX_KEY = 12


class Rule(BaseModel):
    """One signature -> cause rule, as written in ``rules.toml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    title: str
    category: str
    kind: Literal["primary", "secondary"]
    patterns: tuple[str, ...] = Field(min_length=1)
    explanation: str
    fix: tuple[str, ...] = Field(min_length=1)
    docs: tuple[str, ...] = Field(min_length=1)

    @field_validator("patterns")
    @classmethod
    def _portable(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            check_pattern(pattern)
        return patterns

    @field_validator("docs")
    @classmethod
    def _links(cls, docs: tuple[str, ...]) -> tuple[str, ...]:
        for link in docs:
            if not link.startswith("https://"):
                raise ValueError(f"doc link {link!r} is not an https URL")
        return docs


class RuleSet(BaseModel):
    """All rules, in file order (the first matching rule wins a line)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: tuple[Rule, ...] = Field(min_length=1)

    @field_validator("rule")
    @classmethod
    def _unique(cls, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        ids = [r.id for r in rules]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate rule ids: {', '.join(dupes)}")
        return rules

    def by_id(self, rule_id: str) -> Rule:
        for rule in self.rule:
            if rule.id == rule_id:
                return rule
        raise KeyError(rule_id)

    def all_patterns(self) -> list[str]:
        """Every pattern the engine matches, rules first (the grep -f list)."""
        own = [p for r in self.rule for p in r.patterns]
        return own + list(GENERIC_ERROR_PATTERNS) + list(RANK_CONTEXT_PATTERNS)


def check_pattern(pattern: str) -> None:
    """Raise ValueError unless ``pattern`` is portable and has a literal key."""
    for bad in _FORBIDDEN:
        if bad in pattern:
            raise ValueError(f"pattern {pattern!r} uses {bad!r}, which grep -E reads differently")
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"pattern {pattern!r} does not compile: {err}") from err
    if len(longest_literal(pattern)) < _MIN_KEY:
        raise ValueError(
            f"pattern {pattern!r} has no literal run of {_MIN_KEY}+ characters outside groups"
        )


def literal_runs(pattern: str) -> list[str]:
    """The literal stretches outside groups and classes that every match contains."""
    runs: list[str] = []
    current: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        char = pattern[i]
        step, literal = _token(pattern, i)
        nxt = pattern[i + step] if i + step < len(pattern) else ""
        optional = nxt in ("*", "?", "{")
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if literal is None or depth or char == ")" or optional:
            if current:
                runs.append("".join(current))
            current = []
        else:
            current.append(literal)
        i += step
    if current:
        runs.append("".join(current))
    return runs


def _token(pattern: str, i: int) -> tuple[int, str | None]:
    """Length of the token at ``i`` and its literal character (None: not a literal)."""
    char = pattern[i]
    if char == "\\":
        return 2, pattern[i + 1]
    if char == "[":
        end = pattern.index("]", i + 2)
        return end - i + 1, None
    if char in ".()|*+?{}^$":
        if char == "{":
            return pattern.index("}", i) - i + 1, None
        return 1, None
    return 1, char


def longest_literal(pattern: str) -> str:
    runs = literal_runs(pattern)
    return max(runs, key=len) if runs else ""


# How common a character is in training logs (lower: rarer). Keys start at the
# rarest character of a literal, so the key scan stops at few positions.
_COMMON = " 0123456789.:-_/=,'\"[]()TZ"
_LOWER_BY_FREQUENCY = "etaoinshrdlcumwfgypbvkjxqz"
_RARE_UPPER = "ABCDGHJKLMPQUVWXY"


def _commonness(char: str) -> int:
    if char in _RARE_UPPER:
        return 1
    if char in _COMMON:
        return 100
    if char.isupper():
        return 10
    if char in _LOWER_BY_FREQUENCY:
        return 20 + len(_LOWER_BY_FREQUENCY) - _LOWER_BY_FREQUENCY.index(char)
    return 20


def pattern_key(pattern: str) -> str:
    """A short literal every match of ``pattern`` contains, starting at a rare character."""
    best = ""
    best_score = 10**9
    for run in literal_runs(pattern):
        for start in range(len(run) - _MIN_KEY + 1):
            score = _commonness(run[start])
            if score < best_score:
                best, best_score = run[start : start + _MAX_KEY], score
    return best


def keys_for(patterns: Sequence[str]) -> list[str]:
    """The keys of ``patterns``, without keys that contain a shorter key."""
    keys = sorted({pattern_key(p) for p in patterns}, key=len)
    kept: list[str] = []
    for key in keys:
        if not any(short in key for short in kept):
            kept.append(key)
    return sorted(kept)


def load_rules(text: str | None = None) -> RuleSet:
    """Parse and validate a rule set; the packaged ``rules.toml`` by default."""
    if text is None:
        return default_rules()
    return RuleSet.model_validate(tomllib.loads(text))


@cache
def default_rules() -> RuleSet:
    text = resources.files("distrun.diagnose").joinpath("rules.toml").read_text("utf-8")
    return RuleSet.model_validate(tomllib.loads(text))
