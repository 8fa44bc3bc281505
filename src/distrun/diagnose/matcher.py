"""Streaming matcher: find the lines of a file that match the rule set.

Three stages, none of which loops over the rules for every line:

1. a *line finder* over whole binary chunks (see :mod:`distrun.diagnose.linefind`):
   Hyperscan with every pattern in one database, or, where it is missing, one
   Python regex of the literal keys every pattern contains;
2. the candidate line is normalised (:mod:`distrun.diagnose.normalize`):
   timestamp, ANSI codes and launcher prefixes off, literal ``\\n`` pastes split;
3. attribution of each logical line to one rule: with Hyperscan, the ids of
   the patterns that match the line (no Python regex is compiled at all);
   without it, one Python alternation per group. Groups in order: benign
   informational lines (dropped), strong signatures (file order), the rank
   context, weak wordings, context frames, generic error lines.

Small files (pasted excerpts, up to ``SMALL_BYTES``) are normalised whole
first, and runs of two and three adjacent logical lines are matched joined as
well (with a space, and without one for a cut mid-word), so a message a terminal
or a paste wrapped is still found.

Memory is bounded: chunks of ``CHUNK_BYTES``; of a line longer than ``MAX_LINE``
its first and its last ``MAX_LINE`` are considered and the middle is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from io import BufferedIOBase

from distrun.diagnose.linefind import HyperscanFinder, make_finder
from distrun.diagnose.normalize import (
    MAX_LINE,
    Hosts,
    Logical,
    Span,
    clean,
    logical_lines,
    pdsh_hosts,
    windows,
)
from distrun.diagnose.rules import (
    BENIGN_ID,
    BENIGN_PATTERNS,
    COLLECTIVE_DUMP_ID,
    COLLECTIVE_DUMP_PATTERNS,
    CONTEXT_PREFIX,
    FAILURE_SIGN_ID,
    FAILURE_SIGN_PATTERNS,
    GENERIC_ERROR_ID,
    GENERIC_ERROR_PATTERNS,
    HINT_PREFIXES,
    PAST_TAIL_PREFIX,
    RANK_CONTEXT_ID,
    RANK_CONTEXT_PATTERNS,
    REPEATED_PREFIX,
    TAIL_PREFIX,
    RuleSet,
    keys_for,
)
from distrun.diagnose.sources import parse_time

END_ID = "end-of-file"  # scan_stream(end=True): a last pseudo-hit whose line is the file's last
LAST_ID = "last-line"  # scan_stream(end=True): the file's last line that is not blank, its text
CHUNK_BYTES = 8 << 20
SMALL_BYTES = 4 << 20
_MAX_LINE_BYTES = MAX_LINE * 4  # a capped line of 4-byte characters
# Wrapped messages are joined for small inputs: two, then three lines, with a space (a
# wrap at a word boundary, whose space the normaliser trimmed) or with nothing (a
# terminal that cut the line mid-word).
WRAPS = ((2, " "), (2, ""), (3, " "), (3, ""))


@dataclass(frozen=True)
class RawHit:
    """A matched logical line: rule id (or the generic/rank-context ids), where, what.

    ``strong``: matched one of the rule's strong patterns; ``rank``/``node``:
    named by the line's prefixes (``span``: all the ranks when they name several, as
    srun's "tasks 2-7"); ``time``: its leading timestamp.
    """

    rule_id: str
    line: int
    text: str
    strong: bool = True
    rank: int | None = None
    node: str | None = None
    time: float | None = None
    span: Span = ()


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
        self._groups = attribution_groups(rules)
        patterns = [p for _, _, group in self._groups for p in group]
        self._owner: list[tuple[int, str, bool]] = [
            (order, rule_id, strong)
            for order, (rule_id, strong, group) in enumerate(self._groups)
            for _ in group
        ]
        self.finder = make_finder(patterns, lambda: keys_for(patterns), fast)
        self._hs = self.finder if isinstance(self.finder, HyperscanFinder) else None
        self._regexes: list[tuple[str, re.Pattern[str], bool]] | None = None
        self._each: list[re.Pattern[str]] | None = None

    def classify(self, text: str) -> tuple[str, bool] | None:
        """(rule id, strong) of the first rule that matches ``text``; None: no match.

        "First" in attribution order: benign lines (never a hit), strong signatures
        (file order), the rank context, weak wordings, context frames, generic error
        lines.
        """
        found = self.matches(text)
        return found[0] if found else None

    def matches(self, text: str) -> list[tuple[str, bool]]:
        """What :meth:`classify` gives, and, when that is a hint (a rule's context, tail,
        past-tail or repeated wording), the other rules' hints the line matches too: a line
        that ends one rule's wait may well be another rule's hang tail."""
        if self._hs is not None:
            ids = self._hs.matching(text.encode("utf-8", "replace"))
            owners = sorted({self._owner[i][:2] for i in ids})
            found = [(rule_id, self._groups[order][1]) for order, rule_id in owners]
        else:
            found = self._python_matches(text)
        if not found or found[0][0] == BENIGN_ID:
            return []
        if not found[0][0].startswith(HINT_PREFIXES):
            return found[:1]
        return [found[0]] + [f for f in found[1:] if f[0].startswith(HINT_PREFIXES)]

    def _python_matches(self, text: str) -> list[tuple[str, bool]]:
        """The first matching group, then, after a hint, every later group that matches."""
        found: list[tuple[str, bool]] = []
        for rule_id, regex, strong in self._python_regexes():
            if regex.search(text):
                found.append((rule_id, strong))
                if not found[0][0].startswith(HINT_PREFIXES):
                    break
        return found

    def _python_regexes(self) -> list[tuple[str, re.Pattern[str], bool]]:
        if self._regexes is None:
            self._regexes = [(i, _alternation(g), s) for i, s, g in self._groups]
        return self._regexes

    def scan_lines(self, lines: Iterable[str], first_line: int = 1) -> Iterator[RawHit]:
        """Match already-split text lines (small inputs: error files, events)."""
        for number, text in enumerate(lines, start=first_line):
            yield from self._match_raw(text, number)

    def scan_stream(self, stream: BufferedIOBase, end: bool = False) -> Iterator[RawHit]:
        """Match a binary stream; small inputs whole (wrapped lines joined), big ones by chunk.

        ``end``: yield, last, an ``END_ID`` pseudo-hit on the file's last line (tail rules
        need to know how near the end a line is); in a small input, the last line that is
        not blank and not an NCCL/RCCL INFO line (a hung job's NCCL_DEBUG=INFO set-up).
        """
        head = stream.read(SMALL_BYTES + 1)
        shown = _Shown()
        if len(head) <= SMALL_BYTES:
            yield from self.scan_small(head)
            last = _last_said(head)
            shown.see(head, 0, len(head), 1 + head.count(b"\n"))
        else:
            counter = [0]
            hosts = pdsh_hosts(head.decode("utf-8", "replace"))
            yield from self._scan_chunks(head, stream, counter, hosts, shown)
            last = counter[0]
        if end:
            yield RawHit(END_ID, last, "", strong=False)
            if shown.text:
                yield RawHit(LAST_ID, shown.line, shown.text, strong=False)

    def _scan_chunks(self, head: bytes, stream: BufferedIOBase, counter: list[int],
                     hosts: Hosts, shown: _Shown) -> Iterator[RawHit]:
        """Whole lines of each chunk, read into one reused buffer (no copy per chunk).

        The buffer holds the unfinished last line of the previous chunk (at most
        ``_MAX_LINE_BYTES``: longer lines are cut there and their rest skipped)
        followed by the next chunk.
        """
        buf = bytearray(max(CHUNK_BYTES, len(head)) + _MAX_LINE_BYTES + 1)
        view = memoryview(buf)
        buf[: len(head)] = head
        filled, carry, line_base, skipping = len(head), 0, 1, False
        tail = b""  # the last _MAX_LINE_BYTES seen of an over-long line
        while filled > carry:
            start = 0
            if skipping:  # the rest of an over-long line: only its end is read
                newline = buf.find(b"\n", 0, filled)
                skipping = newline < 0
                end = filled if skipping else newline
                tail = (tail + bytes(buf[max(0, end - _MAX_LINE_BYTES):end]))[-_MAX_LINE_BYTES:]
                if not skipping:
                    yield from self._scan_region(tail + b"\n", 0, -1, line_base, hosts)
                    shown.see(tail, 0, len(tail), line_base)
                    tail = b""
                start = end if skipping else end + 1
                line_base += 0 if skipping else 1
            cut = buf.rfind(b"\n", start, filled) + 1
            if cut > start:
                yield from self._scan_region(buf, start, cut, line_base, hosts)
                newlines = buf.count(b"\n", start, cut)
                shown.see(buf, start, cut, line_base + newlines)
                line_base += newlines
            else:
                cut = start
            carry = filled - cut
            if carry > _MAX_LINE_BYTES:
                yield from self._scan_region(bytes(buf[cut : cut + _MAX_LINE_BYTES]) + b"\n", 0, -1,
                                             line_base, hosts)
                # its end so far: an error may go on into the next chunk
                tail = bytes(buf[max(cut + _MAX_LINE_BYTES, filled - _MAX_LINE_BYTES):filled])
                carry, skipping = 0, True
            buf[:carry] = buf[filled - carry : filled]
            filled = carry + (stream.readinto(view[carry : carry + CHUNK_BYTES]) or 0)
        if carry and not skipping:
            yield from self._scan_region(bytes(buf[:carry]) + b"\n", 0, -1, line_base, hosts)
            shown.see(buf, 0, carry, line_base)  # one unfinished line: no newline in it
        if skipping and tail:  # the file ends inside an over-long line
            yield from self._scan_region(tail + b"\n", 0, -1, line_base, hosts)
            shown.see(tail, 0, len(tail), line_base)
        counter[0] = line_base if carry and not skipping else line_base - 1

    def _scan_region(self, data: bytes | bytearray, begin: int, size: int,
                     line_base: int, hosts: Hosts = frozenset()) -> Iterator[RawHit]:
        """``data[begin:size]`` (to the end for -1) holds whole lines; yield the matching ones."""
        size = len(data) if size < 0 else size
        counted = begin
        line = line_base
        for start, end in self.finder.line_spans(data, begin, size):
            line += data.count(b"\n", counted, start)
            counted = start
            stop = min(end, start + _MAX_LINE_BYTES)
            yield from self._match_raw(bytes(data[start:stop]).decode("utf-8", "replace"), line,
                                       hosts)
            if end > stop:  # an over-long line: its end too
                tail = bytes(data[max(stop, end - _MAX_LINE_BYTES):end])
                yield from self._match_raw(tail.decode("utf-8", "replace"), line, hosts)

    def _match_raw(self, raw: str, number: int, hosts: Hosts = frozenset()) -> Iterator[RawHit]:
        for piece in windows(raw.rstrip("\r")):
            when, rest = parse_time(piece)
            for logical in logical_lines(rest, hosts):
                for found in self.matches(logical.text):
                    yield _hit(found, number, when, logical)

    def scan_small(self, data: bytes) -> Iterator[RawHit]:
        """A whole small input: every line normalised, wrapped messages joined."""
        entries = _entries(data.decode("utf-8", "replace"))
        texts = [e.logical.text for e in entries]
        hits: dict[int, RawHit] = {}
        more: dict[int, list[RawHit]] = {}  # other rules' hints on a hint's line
        for index in self._candidates(texts):
            if index >= len(entries):
                continue
            entry = entries[index]
            found = [_hit(f, entry.line, entry.time, entry.logical)
                     for f in self.matches(entry.logical.text)]
            if found:
                hits[index], more[index] = found[0], found[1:]
        for width, glue in WRAPS:
            self._join_wrapped(entries, texts, hits, width, glue)
        for index in sorted(hits):
            yield hits[index]
            if hits[index].rule_id.startswith(HINT_PREFIXES):  # not joined into a message
                yield from more.get(index, ())

    def _join_wrapped(self, entries: list[_Entry], texts: list[str], hits: dict[int, RawHit],
                      width: int, glue: str) -> None:
        """Match ``width`` adjacent lines joined by ``glue`` where none names a cause alone.

        A line that matched only a weak wording or the generic error pattern may be a
        piece of the joined message: when the joined text names a cause (a strong one,
        or the same rule's weak one), the pieces' own hits give way to it.
        """
        joined = [glue.join(texts[i : i + width]) for i in range(len(texts) - width + 1)]
        for index in self._candidates(joined):
            members = [hits.get(index + k) for k in range(width)] if index < len(joined) else []
            # a piece that names a cause alone keeps it; a consequence's piece only gives way
            # to a primary cause the joined text names outright (torchelastic's "failed
            # (exitcode:" / "-9) local_rank: 0 (pid: 1) of binary": the kill it reports)
            strong = [m.rule_id for m in members if m is not None and _is_rule(m) and m.strong]
            if not members or any(self._primary(rule_id) for rule_id in strong):
                continue
            found = self.classify(joined[index])
            if found is None or not _names_a_cause(found[0]) or (
                    strong and not (found[1] and self._primary(found[0]))):
                continue
            if not found[1] and not self._weak_join_gains(found[0], members,
                                                          texts[index : index + width], glue):
                continue
            for k in range(1, width):
                hits.pop(index + k, None)
            entry, pieces = entries[index], entries[index : index + width]
            # the rank of the first piece that names one (a wrap can leave the first bare)
            ranked = next((e.logical for e in pieces if e.logical.rank is not None), None)
            node = next((e.logical.node for e in pieces if e.logical.node is not None), None)
            hits[index] = _hit(found, entry.line, entry.time, Logical(
                joined[index], ranked.rank if ranked else None, node, ranked.span if ranked else ()))

    def _primary(self, rule_id: str) -> bool:
        return self.rules.by_id(rule_id).kind == "primary"

    def _weak_join_gains(self, rule_id: str, members: list[RawHit | None], pieces: list[str],
                         glue: str) -> bool:
        """A weak wording found in joined lines: worth it when no piece named a cause, or
        when an unknown error piece is part of the wording (without it, it is not found)."""
        named = [m for m in members if _is_rule(m)]
        if not named:
            return True
        unknown = [k for k, m in enumerate(members) if m is not None and m.rule_id == GENERIC_ERROR_ID]
        if not unknown or any(m is not None and m.rule_id != rule_id for m in named):
            return False
        rest = glue.join(p for k, p in enumerate(pieces) if k not in unknown)
        gained = self._pattern_ids(glue.join(pieces)) - self._pattern_ids(rest)
        return any(self._owner[i][1] == rule_id for i in gained)

    def _pattern_ids(self, text: str) -> set[int]:
        """Indices (attribution order) of the patterns that match ``text``."""
        if self._hs is not None:
            return set(self._hs.matching(text.encode("utf-8", "replace")))
        if self._each is None:
            self._each = [re.compile(p) for _, _, group in self._groups for p in group]
        return {i for i, regex in enumerate(self._each) if regex.search(text)}

    def _candidates(self, texts: list[str]) -> Iterator[int]:
        """Indices of the texts the line finder picks."""
        data = ("\n".join(texts) + "\n").encode("utf-8", "replace")
        counted, index = 0, 0
        for start, _end in self.finder.line_spans(data, 0, len(data)):
            index += data.count(b"\n", counted, start)
            counted = start
            yield index


_INFO = (b" NCCL INFO ", b" RCCL INFO ")


def _last_said(data: bytes) -> int:
    """The number of the last line of ``data`` that is neither blank nor NCCL INFO."""
    found = _last_line(data, 0, len(data), _INFO)
    return data.count(b"\n", 0, found) + 1 if found is not None else 1


def _last_line(data: bytes | bytearray, begin: int, end: int,
               skip: tuple[bytes, ...] = ()) -> int | None:
    """Where the last line of ``data[begin:end]`` starts that is not blank and holds none of
    ``skip``; None: there is none."""
    while end > begin:
        start = max(data.rfind(b"\n", begin, end) + 1, begin)
        line = data[start:end]
        if line.strip() and not any(word in line for word in skip):
            return start
        end = start - 1
    return None


class _Shown:
    """The last line of a file that is not blank: where a log stopped (a hang's last words)."""

    def __init__(self) -> None:
        self.line, self.text = 0, ""

    def see(self, data: bytes | bytearray, begin: int, end: int, after: int) -> None:
        """``data[begin:end]``: lines; ``after``: the number of its first line plus its
        newlines (the region's lines are counted once, by the caller)."""
        start = _last_line(data, begin, end)
        if start is None:
            return
        stop = data.find(b"\n", start, end)
        stop = end if stop < 0 else stop
        raw = bytes(data[max(start, stop - _MAX_LINE_BYTES):stop]).decode("utf-8", "replace")
        # a progress bar redraws its line after each "\r": the terminal showed the last one
        text = next((t for t in map(clean, reversed(raw.split("\r"))) if t.strip()), "")
        if text:
            self.line, self.text = after - data.count(b"\n", start, end), text


def attribution_groups(rules: RuleSet) -> list[tuple[str, bool, tuple[str, ...]]]:
    """(rule id, strong, patterns) in the order that decides which rule a line belongs to."""
    groups: list[tuple[str, bool, tuple[str, ...]]] = [(BENIGN_ID, False, BENIGN_PATTERNS)]
    groups.extend((r.id, True, r.patterns) for r in rules.rule)
    groups.append((RANK_CONTEXT_ID, True, RANK_CONTEXT_PATTERNS))
    groups.extend((r.id, False, r.weak) for r in rules.rule if r.weak)
    groups.extend((TAIL_PREFIX + r.id, False, r.tail) for r in rules.rule if r.tail)
    groups.extend((PAST_TAIL_PREFIX + r.id, False, r.past_tail) for r in rules.rule if r.past_tail)
    groups.extend((REPEATED_PREFIX + r.id, False, r.repeated) for r in rules.rule if r.repeated)
    groups.extend((CONTEXT_PREFIX + r.id, False, r.context) for r in rules.rule if r.context)
    groups.append((COLLECTIVE_DUMP_ID, False, COLLECTIVE_DUMP_PATTERNS))
    groups.append((GENERIC_ERROR_ID, True, GENERIC_ERROR_PATTERNS))
    groups.append((FAILURE_SIGN_ID, False, FAILURE_SIGN_PATTERNS))
    return groups


def _entries(text: str) -> list[_Entry]:
    entries: list[_Entry] = []
    hosts = pdsh_hosts(text)
    for number, raw in enumerate(text.split("\n"), start=1):
        for piece in windows(raw.rstrip("\r")):
            when, rest = parse_time(piece)
            entries.extend(_Entry(number, when, logical) for logical in logical_lines(rest, hosts))
    return entries


def _names_a_cause(rule_id: str) -> bool:
    return rule_id not in (GENERIC_ERROR_ID, RANK_CONTEXT_ID, COLLECTIVE_DUMP_ID,
                           FAILURE_SIGN_ID) and \
        not rule_id.startswith(HINT_PREFIXES)


def _is_rule(hit: RawHit | None) -> bool:
    return hit is not None and _names_a_cause(hit.rule_id)


def _hit(found: tuple[str, bool], line: int, when: float | None, logical: Logical) -> RawHit:
    rule_id, strong = found
    return RawHit(rule_id, line, logical.text, strong, logical.rank, logical.node, when,
                  logical.span)


def _alternation(patterns: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))
