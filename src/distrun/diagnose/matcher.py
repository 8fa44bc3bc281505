"""Streaming matcher: find the lines of a file that match the rule set.

Three stages, none of which loops over the rules for every line:

1. a *key scan* over whole binary chunks: one compiled regex that is the
   prefix-factored alternation of the literal keys every pattern contains;
2. the *combined* regex (all full patterns in one alternation) on the lines
   that hold a key;
3. per-rule attribution on the lines the combined regex matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

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


class _Trie(dict[str, "_Trie"]):
    """A character trie; the key "" marks the end of a word."""


def trie_regex(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, factored by common prefixes."""
    root = _Trie()
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, _Trie())
        node[""] = _Trie()
    return _emit(root)


def _emit(node: _Trie) -> str:
    if "" in node:
        # A key ends here: any longer key through this node is already covered.
        return ""
    branches = [re.escape(c) + _emit(child) for c, child in sorted(node.items())]
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"


class Matcher:
    """The compiled matchers for one rule set."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        patterns = rules.all_patterns()
        self.keys = keys_for(patterns)
        self.key_regex = re.compile(trie_regex(self.keys).encode())
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
                    yield from self._scan_region(buf + b"\n", line_base)
                return
            cut = buf.rfind(b"\n") + 1
            region, carry = buf[:cut], buf[cut:]
            yield from self._scan_region(region, line_base)
            line_base += region.count(b"\n")

    def _scan_region(self, region: bytes, line_base: int) -> Iterator[RawHit]:
        """``region`` holds whole lines; yield the matching ones."""
        pos = 0
        counted = 0
        line = line_base
        search = self.key_regex.search
        while True:
            found = search(region, pos)
            if found is None:
                return
            start = region.rfind(b"\n", 0, found.start()) + 1
            end = region.find(b"\n", found.end())
            line += region.count(b"\n", counted, start)
            counted = start
            text = region[start:end].decode("utf-8", "replace").rstrip("\r")
            rule_id = self.classify(text)
            if rule_id is not None:
                yield RawHit(rule_id, line, text)
            pos = end + 1


def _alternation(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))
