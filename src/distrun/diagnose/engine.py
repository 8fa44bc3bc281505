"""The diagnose engine: from log files to an ordered list of causes.

Reading is streaming (see :mod:`distrun.diagnose.matcher`); only matched lines
are kept. The verdict follows torchelastic's own rule: the *earliest* failure
is the root cause. Primary causes (OOM, bad device ordinal, ...) always beat
secondary ones (collective timeouts, closed connections, the launcher's
summary), which are what the other ranks raise because one rank died. An
error line no rule knows, seen before any secondary signature, gives "no known
cause" with the earliest error lines instead of a confident wrong answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from distrun.diagnose.matcher import Matcher, RawHit
from distrun.diagnose.rules import (
    GENERIC_ERROR_ID,
    RANK_CONTEXT_ID,
    Rule,
    RuleSet,
    default_rules,
)
from distrun.diagnose.sources import (
    LogFile,
    RankExit,
    RunInfo,
    iter_paths,
    parse_time,
    read_error_file,
    read_run_info,
)

SIGKILL_RULE = "host-oom-or-killed"
COVER_LINES = 5  # an unknown error line this close to a known one belongs to it
MAX_EVIDENCE = 6
MAX_CONSEQUENCES = 12
MAX_UNRECOGNISED = 8

_LINE_RANK = re.compile(r"^\[(?:rank|default)(\d+)\]:|\[(?:PG [^]]*)?Rank (\d+)\]")
_CONTEXT_RANK = re.compile(r"rank\s*:\s*(\d+)")


@dataclass(frozen=True)
class Hit:
    """A matched line placed in the run: which rule, which rank, when, where."""

    rule_id: str
    rank: int | None
    time: float | None
    file: str
    line: int
    text: str
    seq: int = 0

    def key(self) -> tuple[float, int, int]:
        """Ordering: by time; untimed lines by their position in their file."""
        return (self.time if self.time is not None else math.inf, self.line, self.seq)


@dataclass(frozen=True)
class Cause:
    """One diagnosed cause with its evidence and the errors it caused."""

    rule: Rule
    rank: int | None
    node: str | None
    evidence: tuple[Hit, ...]
    consequences: tuple[Hit, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    """The verdict: causes (most likely first) or the unrecognised error lines."""

    causes: tuple[Cause, ...]
    unrecognised: tuple[Hit, ...]
    failed_exits: tuple[RankExit, ...]
    files: int

    @property
    def failed(self) -> bool:
        return bool(self.causes or self.unrecognised or self.failed_exits)


def diagnose(paths: Iterable[Path], rules: RuleSet | None = None) -> Diagnosis:
    """Read every path (run dirs, dirs, files) and return the verdict."""
    ruleset = rules or default_rules()
    path_list = list(paths)
    matcher = Matcher(ruleset)
    info = read_run_info(path_list)
    hits: list[Hit] = []
    files = list(iter_paths(path_list))
    for log in files:
        hits.extend(_file_hits(log, matcher, info))
    hits.extend(_exit_hits(info))
    hits = [replace(h, seq=i) for i, h in enumerate(hits)]
    failed_exits = tuple(e for e in info.exits if e.exitcode != 0)
    return decide(hits, ruleset, info, failed_exits, len(files))


def _file_hits(log: LogFile, matcher: Matcher, info: RunInfo) -> list[Hit]:
    if log.path.name == "error.json":
        return _error_file_hits(log, matcher, info)
    with log.path.open("rb") as stream:
        raw = list(matcher.scan_stream(stream))
    return _place(raw, log, str(log.path))


def _place(raw: list[RawHit], log: LogFile, name: str) -> list[Hit]:
    """Give each raw hit its time and rank; rank-context lines set the rank after them."""
    placed: list[Hit] = []
    context: int | None = None
    last_time: float | None = None
    for item in raw:
        when, text = parse_time(item.text)
        last_time = when if when is not None else last_time
        if item.rule_id == RANK_CONTEXT_ID:
            found = _CONTEXT_RANK.search(text)
            context = int(found.group(1)) if found else context
            continue
        rank = _line_rank(text, log.rank if context is None else context)
        placed.append(Hit(item.rule_id, rank, when or last_time, name, item.line, text.strip()))
    return placed


def _line_rank(text: str, default: int | None) -> int | None:
    found = _LINE_RANK.search(text)
    if found is None:
        return default
    return int(found.group(1) or found.group(2))


def _error_file_hits(log: LogFile, matcher: Matcher, info: RunInfo) -> list[Hit]:
    content = read_error_file(log.path)
    rank = _rank_of_local(content.local_rank, log.path, info)
    return [
        Hit(raw.rule_id, rank, content.time, str(log.path), 1, raw.text.strip())
        for raw in matcher.scan_lines(content.lines)
        if raw.rule_id != RANK_CONTEXT_ID
    ]


def _rank_of_local(local: int | None, path: Path, info: RunInfo) -> int | None:
    if local is None:
        return None
    nodes = {node for node, _ in info.local_ranks}
    if len(nodes) == 1:
        return info.local_ranks.get((nodes.pop(), local), local)
    return local if not info.local_ranks else None


def _exit_hits(info: RunInfo) -> list[Hit]:
    """A SIGKILL on the *first* rank to fail, with no traceback, is a cause."""
    failures = sorted(
        (e for e in info.exits if e.exitcode != 0),
        key=lambda e: (e.time if e.time is not None else math.inf, e.line),
    )
    if not failures or info.events_path is None:
        return []
    first = failures[0]
    if first.signal != "SIGKILL" and first.exitcode != -9:
        return []
    where = str(info.events_path)
    return [Hit(SIGKILL_RULE, first.rank, first.time, where, first.line, first.text)]


def decide(
    hits: list[Hit],
    rules: RuleSet,
    info: RunInfo,
    failed_exits: tuple[RankExit, ...] = (),
    files: int = 0,
) -> Diagnosis:
    """Order the hits and pick the root cause (see the module docstring)."""
    hits = sorted(hits, key=Hit.key)
    generic = _uncovered([h for h in hits if h.rule_id == GENERIC_ERROR_ID], hits)
    known = [h for h in hits if h.rule_id != GENERIC_ERROR_ID]
    primary = [h for h in known if rules.by_id(h.rule_id).kind == "primary"]
    secondary = [h for h in known if rules.by_id(h.rule_id).kind == "secondary"]
    if primary:
        causes = _causes(primary, secondary, rules, info)
        before = [g for g in generic if g.key() < primary[0].key()]
        return Diagnosis(causes, tuple(before[:MAX_UNRECOGNISED]), failed_exits, files)
    if secondary and not (generic and generic[0].key() < secondary[0].key()):
        ordered = sorted(secondary, key=lambda h: (_secondary_rank(h, rules), h.key()))
        causes = _causes(ordered, [], rules, info)
        return Diagnosis(causes, (), failed_exits, files)
    return Diagnosis((), tuple(generic[:MAX_UNRECOGNISED]), failed_exits, files)


def _secondary_rank(hit: Hit, rules: RuleSet) -> int:
    """The launcher's summary explains least; every other secondary comes first."""
    return 1 if rules.by_id(hit.rule_id).category == "launcher" else 0


def _uncovered(generic: list[Hit], hits: list[Hit]) -> list[Hit]:
    """Unknown error lines not next to a known one in the same file."""
    known: dict[str, list[int]] = {}
    for hit in hits:
        if hit.rule_id != GENERIC_ERROR_ID:
            known.setdefault(hit.file, []).append(hit.line)
    return [
        g
        for g in generic
        if not any(abs(line - g.line) <= COVER_LINES for line in known.get(g.file, ()))
    ]


def _causes(
    ordered: list[Hit], consequences: list[Hit], rules: RuleSet, info: RunInfo
) -> tuple[Cause, ...]:
    """Group hits by rule in order of first appearance; the first is the root cause."""
    groups: dict[str, list[Hit]] = {}
    for hit in ordered:
        groups.setdefault(hit.rule_id, []).append(hit)
    causes: list[Cause] = []
    for index, (rule_id, group) in enumerate(groups.items()):
        rank = next((h.rank for h in group if h.rank is not None), None)
        node = info.nodes.get(rank) if rank is not None else None
        after = _one_per_rank(consequences) if index == 0 else ()
        evidence = _evidence(group)
        causes.append(Cause(rules.by_id(rule_id), rank, node, evidence, after))
    return tuple(causes)


def _evidence(group: list[Hit]) -> tuple[Hit, ...]:
    """The first lines of the root rank, then the first line of each other rank."""
    root = group[0].rank
    own = [h for h in group if h.rank == root][: MAX_EVIDENCE // 2]
    others = [h for h in _one_per_rank(group) if h.rank != root]
    return tuple((own + others)[:MAX_EVIDENCE])


def _one_per_rank(hits: list[Hit]) -> tuple[Hit, ...]:
    seen: set[tuple[int | None, str]] = set()
    kept: list[Hit] = []
    for hit in hits:
        if (hit.rank, hit.rule_id) not in seen:
            seen.add((hit.rank, hit.rule_id))
            kept.append(hit)
    return tuple(kept[:MAX_CONSEQUENCES])
