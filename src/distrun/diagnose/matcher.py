"""Streaming matcher: find the lines of a file that match the rule set.

Three stages, none of which loops over the rules for every line:

1. a *line finder* over whole binary chunks (see :mod:`distrun.diagnose.linefind`):
   Hyperscan with every pattern in one database, or, where it is missing, one
   Python regex of the literal keys every pattern contains;
2. the *combined* regex (all full patterns in one alternation) on the
   candidate lines;
3. per-rule attribution on the lines the combined regex matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from distrun.diagnose.linefind import make_finder
from distrun.diagnose.rules import (
    GENERIC_ERROR_ID,
    GENERIC_ERROR_PATTERNS,
    RANK_CONTEXT_ID,
    RANK_CONTEXT_PATTERNS,
    RuleSet,
    keys_for,
)

CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class RawHit:
    """A matched line: rule id (or the generic/rank-context ids), line number, text."""

    rule_id: str
    line: int
    text: str


class Matcher:
    """The compiled matchers for one rule set."""

    def __init__(self, rules: RuleSet, fast: bool = True) -> None:
        """``fast=False`` forces the pure-Python line finder."""
        self.rules = rules
        patterns = rules.all_patterns()
        self.keys = keys_for(patterns)
        self.finder = make_finder(patterns, self.keys, fast)
        self.combined = re.compile("|".join(f"(?:{p})" for p in patterns))
        self._attribution: list[tuple[str, re.Pattern[str]]] = [
            (r.id, re.compile("|".join(f"(?:{p})" for p in r.patterns))) for r in rules.rule
        ]
        self._attribution.append((RANK_CONTEXT_ID, _alternation(RANK_CONTEXT_PATTERNS)))
        self._attribution.append((GENERIC_ERROR_ID, _alternation(GENERIC_ERROR_PATTERNS)))

    def classify(self, text: str) -> str | None:
        """The id of the first rule that matches ``text`` (None: no match)."""
        if not self.combined.search(text):
            return None
        for rule_id, regex in self._attribution:
            if regex.search(text):
                return rule_id
        return None  # pragma: no cover - combined matched, so one rule does

    def scan_lines(self, lines: Iterable[str], first_line: int = 1) -> Iterator[RawHit]:
        """Match already-split text lines (small inputs: error files, events)."""
        for number, text in enumerate(lines, start=first_line):
            rule_id = self.classify(text)
            if rule_id is not None:
                yield RawHit(rule_id, number, text)

    def scan_stream(self, stream: BinaryIO) -> Iterator[RawHit]:
        """Match a binary stream chunk by chunk; lines are numbered from 1."""
        carry = b""
        line_base = 1
        while True:
            block = stream.read(CHUNK_BYTES)
            buf = carry + block
            if not block:
                if buf:
                    yield from self._scan_region(buf + b"\n", len(buf) + 1, line_base)
                return
            cut = buf.rfind(b"\n") + 1
            yield from self._scan_region(buf, cut, line_base)
            line_base += buf.count(b"\n", 0, cut)
            carry = buf[cut:]

    def _scan_region(self, data: bytes, size: int, line_base: int) -> Iterator[RawHit]:
        """``data[:size]`` holds whole lines; yield the matching ones."""
        counted = 0
        line = line_base
        for start, end in self.finder.line_spans(data, size):
            line += data.count(b"\n", counted, start)
            counted = start
            text = data[start:end].decode("utf-8", "replace").rstrip("\r")
            rule_id = self.classify(text)
            if rule_id is not None:
                yield RawHit(rule_id, line, text)


def _alternation(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))
