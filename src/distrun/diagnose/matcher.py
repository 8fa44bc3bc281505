"""Streaming matcher: find the lines of a file that match the rule set.

Three stages, none of which loops over the rules for every line:

1. a *line finder* over whole binary chunks (see :mod:`distrun.diagnose.linefind`):
   Hyperscan with every pattern in one database, or, where it is missing, one
   Python regex of the literal keys every pattern contains;
2. the candidate line is normalised (:mod:`distrun.diagnose.normalize`):
   timestamp, ANSI codes and launcher prefixes off, literal ``\\n`` pastes split;
3. the *combined* regex (all full patterns in one alternation) on each logical
   line, then per-rule attribution: strong patterns first, weak ones after.

Small files (pasted excerpts, up to ``SMALL_BYTES``) are normalised whole
first, and each pair of adjacent logical lines is matched joined as well, so a
message a terminal wrapped in the middle is still found.

Memory is bounded: chunks of ``CHUNK_BYTES``; a line longer than
``MAX_LINE`` is considered up to that length and the rest of it is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from distrun.diagnose.linefind import make_finder
from distrun.diagnose.normalize import MAX_LINE, Logical, logical_lines
from distrun.diagnose.rules import (
    CONTEXT_PREFIX,
    GENERIC_ERROR_ID,
    GENERIC_ERROR_PATTERNS,
    RANK_CONTEXT_ID,
    RANK_CONTEXT_PATTERNS,
    RuleSet,
    keys_for,
)
from distrun.diagnose.sources import parse_time

CHUNK_BYTES = 8 << 20
SMALL_BYTES = 4 << 20
_MAX_LINE_BYTES = MAX_LINE * 4  # a capped line of 4-byte characters


@dataclass(frozen=True)
class RawHit:
    """A matched logical line: rule id (or the generic/rank-context ids), where, what.

    ``strong``: matched one of the rule's strong patterns; ``rank``/``node``:
    named by the line's prefixes; ``time``: its leading timestamp.
    """

    rule_id: str
    line: int
    text: str
    strong: bool = True
    rank: int | None = None
    node: str | None = None
    time: float | None = None


@dataclass(frozen=True)
class _Entry:
    line: int
    time: float | None
    logical: Logical


class Matcher:
    """The compiled matchers for one rule set."""

    def __init__(self, rules: RuleSet, fast: bool = True) -> None:
        """``fast=False`` forces the pure-Python line finder."""
        self.rules = rules
        patterns = rules.all_patterns()
        self.keys = keys_for(patterns)
        self.finder = make_finder(patterns, self.keys, fast)
        self.combined = _alternation(patterns)
        strong = [(r.id, _alternation(r.patterns), True) for r in rules.rule]
        weak = [(r.id, _alternation(r.weak), False) for r in rules.rule if r.weak]
        context = [(CONTEXT_PREFIX + r.id, _alternation(r.context), False)
                   for r in rules.rule if r.context]
        self._attribution = [
            *strong,
            (RANK_CONTEXT_ID, _alternation(RANK_CONTEXT_PATTERNS), True),
            *weak,
            *context,
            (GENERIC_ERROR_ID, _alternation(GENERIC_ERROR_PATTERNS), True),
        ]

    def classify(self, text: str) -> tuple[str, bool] | None:
        """(rule id, strong) of the first rule that matches ``text``; None: no match."""
        if not self.combined.search(text):
            return None
        for rule_id, regex, strong in self._attribution:
            if regex.search(text):
                return rule_id, strong
        return None  # pragma: no cover - combined matched, so one rule does

    def scan_lines(self, lines: Iterable[str], first_line: int = 1) -> Iterator[RawHit]:
        """Match already-split text lines (small inputs: error files, events)."""
        for number, text in enumerate(lines, start=first_line):
            yield from self._match_raw(text, number)

    def scan_stream(self, stream: BinaryIO) -> Iterator[RawHit]:
        """Match a binary stream; small inputs whole (wrapped lines joined), big ones by chunk."""
        head = stream.read(SMALL_BYTES + 1)
        if len(head) <= SMALL_BYTES:
            yield from self.scan_small(head)
            return
        yield from self._scan_chunks(head, stream)

    def _scan_chunks(self, head: bytes, stream: BinaryIO) -> Iterator[RawHit]:
        carry, line_base, skipping = b"", 1, False
        block = head
        while block:
            if skipping:  # the rest of an over-long line
                newline = block.find(b"\n")
                if newline < 0:
                    block = stream.read(CHUNK_BYTES)
                    continue
                block, skipping, line_base = block[newline + 1 :], False, line_base + 1
            buf = carry + block
            cut = buf.rfind(b"\n") + 1
            yield from self._scan_region(buf, cut, line_base)
            line_base += buf.count(b"\n", 0, cut)
            carry = buf[cut:]
            if len(carry) > _MAX_LINE_BYTES:
                yield from self._scan_region(carry[:_MAX_LINE_BYTES] + b"\n", -1, line_base)
                carry, skipping = b"", True
            block = stream.read(CHUNK_BYTES)
        if carry and not skipping:
            yield from self._scan_region(carry + b"\n", len(carry) + 1, line_base)

    def _scan_region(self, data: bytes, size: int, line_base: int) -> Iterator[RawHit]:
        """``data[:size]`` (all of it for -1) holds whole lines; yield the matching ones."""
        size = len(data) if size < 0 else size
        counted = 0
        line = line_base
        for start, end in self.finder.line_spans(data, size):
            line += data.count(b"\n", counted, start)
            counted = start
            stop = min(end, start + _MAX_LINE_BYTES)
            yield from self._match_raw(data[start:stop].decode("utf-8", "replace"), line)

    def _match_raw(self, raw: str, number: int) -> Iterator[RawHit]:
        when, rest = parse_time(raw.rstrip("\r"))
        for logical in logical_lines(rest):
            found = self.classify(logical.text)
            if found is not None:
                yield _hit(found, number, when, logical)

    def scan_small(self, data: bytes) -> Iterator[RawHit]:
        """A whole small input: every line normalised, wrapped messages joined."""
        entries = _entries(data.decode("utf-8", "replace"))
        texts = [e.logical.text for e in entries]
        hits: dict[int, RawHit] = {}
        for index in self._candidates(texts):
            entry = entries[index]
            found = self.classify(entry.logical.text)
            if found is not None:
                hits[index] = _hit(found, entry.line, entry.time, entry.logical)
        pairs = [texts[i] + " " + texts[i + 1] for i in range(len(texts) - 1)]
        for index in self._candidates(pairs):
            if _is_rule(hits.get(index)) or _is_rule(hits.get(index + 1)):
                continue
            found = self.classify(pairs[index])
            if found is not None and _names_a_cause(found[0]):
                entry = entries[index]
                joined = Logical(pairs[index], entry.logical.rank, entry.logical.node)
                hits[index] = _hit(found, entry.line, entry.time, joined)
        yield from (hits[i] for i in sorted(hits))

    def _candidates(self, texts: list[str]) -> Iterator[int]:
        """Indices of the texts the line finder picks."""
        data = ("\n".join(texts) + "\n").encode("utf-8", "replace")
        counted, index = 0, 0
        for start, _end in self.finder.line_spans(data, len(data)):
            index += data.count(b"\n", counted, start)
            counted = start
            yield index


def _entries(text: str) -> list[_Entry]:
    entries: list[_Entry] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        when, rest = parse_time(raw.rstrip("\r"))
        entries.extend(_Entry(number, when, logical) for logical in logical_lines(rest))
    return entries


def _names_a_cause(rule_id: str) -> bool:
    return rule_id not in (GENERIC_ERROR_ID, RANK_CONTEXT_ID) and not rule_id.startswith(
        CONTEXT_PREFIX)


def _is_rule(hit: RawHit | None) -> bool:
    return hit is not None and _names_a_cause(hit.rule_id)


def _hit(found: tuple[str, bool], line: int, when: float | None, logical: Logical) -> RawHit:
    rule_id, strong = found
    return RawHit(rule_id, line, logical.text, strong, logical.rank, logical.node, when)


def _alternation(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))
