"""The diagnose engine: from log files to an ordered list of causes.

Reading is streaming (see :mod:`distrun.diagnose.matcher`); only matched lines
are kept. The verdict follows torchelastic's own rule: the *earliest* failure
is the root cause. Primary causes (OOM, bad device ordinal, ...) always beat
secondary ones (collective timeouts, closed connections, the launcher's
summary, SIGTERM sent by the launcher), which are what the other ranks raise
because one rank died: a cause wins even when it comes later in the file.
With only consequences, the verdict says so and names where the cause must be
(see :mod:`distrun.diagnose.consequence`). An error line no rule knows, seen
before any secondary signature, gives "no known cause" with the earliest error
lines instead of a confident wrong answer; so does an unknown error line before
a cause matched only by a weak wording (one that other failures share).
Logs with neither a cause nor an unknown error get two last readings from the
rules' data: a once-per-process line (``repeated``) printed by two processes,
and, in a file with no error line at all, what a hung job prints last
(``tail``, near the end of the file).

Confidence: ``high`` for a cause matched by a strong signature with no unknown
error before it; ``medium`` for a cause with unknown errors before it, one
derived from other lines (a collective mismatch read from watchdog dumps, a
signal in the run record), one on a rank other than the one the launcher's
summary names as the first failure, or a verdict of consequences only; ``low``
for a cause matched only by a weak wording. Rules cap their own confidence
(``max_confidence``) where the error says how a process died, not why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from distrun.diagnose.consequence import (
    dump_mismatch_hits,
    first_failure,
    first_failure_rank,
    mismatch_hits,
    repeated_hits,
    silent_exits,
    stopped_first,
    suspects,
    where_to_look,
)
from distrun.diagnose.hit import Hit
from distrun.diagnose.matcher import END_ID, LAST_ID, Matcher, RawHit
from distrun.diagnose.normalize import SRUN_SIGNALS, SRUN_STATUSES, rank_in_text
from distrun.diagnose.reading import open_log
from distrun.diagnose.rules import (
    COLLECTIVE_DUMP_ID,
    CONFIDENCES,
    CONTEXT_PREFIX,
    FAILURE_SIGN_ID,
    GENERIC_ERROR_ID,
    HINT_PREFIXES,
    PAST_TAIL_PREFIX,
    RANK_CONTEXT_ID,
    REPEATED_PREFIX,
    TAIL_PREFIX,
    Rule,
    RuleSet,
    default_rules,
)
from distrun.diagnose.sources import (
    LogFile,
    RankExit,
    RunInfo,
    iter_paths,
    read_error_file,
    read_run_info,
)
from distrun.diagnose.stalls import StallEvent
from distrun.estimate.oom import OomReport
from distrun.estimate.oom import report as oom_report

SIGKILL_RULE = "host-oom-or-killed"
STOPPED_RULE = "stopped-externally"
STALL_RULE = "distrun-stall"
SUMMARY_RULE = "elastic-summary-no-root-cause"
# srun's report of how tasks ended (src/srun launch.c _task_finish): normalize keeps its
# "task(s) N: " before the status
_SRUN_REPORT = re.compile(rf"tasks? [0-9,-]+: (?:{SRUN_STATUSES})$")
_SRUN_SIGNAL = re.compile(rf"tasks? [0-9,-]+: (?:{SRUN_SIGNALS})$")
CONTEXT_LINES = 200  # a frame or job-script line this near an error (either side) is its context
SUMMARY_BLOCK = 10  # lines of a summary block after its "rank : N (local_rank: M)" line
COVER_LINES = 5  # an unknown error line this close to a known one belongs to it
MAX_EVIDENCE = 6
MAX_CONSEQUENCES = 12
MAX_UNRECOGNISED = 8
MAX_ENDS = 16  # the logs whose last line a verdict keeps
KEEP_PER_RANK = 20  # hits kept per (rule, rank) and file
MAX_KEYS = 4096  # distinct (rule, rank) pairs kept per file
TAIL_LINES = 30  # a tail pattern counts this near the end of its file

__all__ = ["Cause", "Diagnosis", "Hit", "decide", "diagnose"]


@dataclass(frozen=True)
class Cause:
    """One diagnosed cause with its evidence, the errors it caused, and how sure we are."""

    rule: Rule
    rank: int | None
    node: str | None
    evidence: tuple[Hit, ...]
    consequences: tuple[Hit, ...] = ()
    confidence: str = "high"
    note: str = ""


@dataclass(frozen=True)
class Diagnosis:
    """The verdict: causes (most likely first) or the unrecognised error lines."""

    causes: tuple[Cause, ...]
    unrecognised: tuple[Hit, ...]
    failed_exits: tuple[RankExit, ...]
    files: int
    oom: tuple[OomReport, ...] = ()  # the ranks' out-of-memory records (rank_oom events)
    skipped: tuple[str, ...] = ()  # run records that could not be read: "file:line: why"
    job_exitcode: int | None = None  # the job's exit code in its run record, if it has one
    ends: tuple[Hit, ...] = ()  # with no error found: each log's last line that is not blank

    @property
    def failed(self) -> bool:
        return bool(self.causes or self.unrecognised or self.failed_exits)

    @property
    def confidence(self) -> str | None:
        """The root cause's confidence; None when no cause is named."""
        return self.causes[0].confidence if self.causes else None


def diagnose(paths: Iterable[Path], rules: RuleSet | None = None) -> Diagnosis:
    """Read every path (run dirs, dirs, files) and return the verdict."""
    ruleset = rules or default_rules()
    path_list = list(paths)
    matcher = matcher_for(ruleset)
    info = read_run_info(path_list)
    hits: list[Hit] = []
    files = list(iter_paths(path_list))
    for log in files:
        hits.extend(_file_hits(log, matcher, info))
    hits.extend(_exit_hits(info))
    hits.extend(_stall_hits(info.stalls))
    hits = [replace(h, seq=i) for i, h in enumerate(hits)]
    failed_exits = tuple(e for e in info.exits if e.exitcode != 0)
    found = decide(hits, ruleset, info, failed_exits, len(files))
    return replace(found, oom=tuple(oom_report(o) for o in info.ooms),
                   skipped=tuple(info.problems), job_exitcode=info.job_exitcode)


@lru_cache(maxsize=4)
def matcher_for(rules: RuleSet) -> Matcher:
    """One compiled matcher per rule set per process (compiling is the costly part)."""
    return Matcher(rules)


def _file_hits(log: LogFile, matcher: Matcher, info: RunInfo) -> list[Hit]:
    if log.path.name == "error.json":
        return _error_file_hits(log, matcher, info)
    with open_log(log.path) as stream:
        return _at_tail(place(matcher.scan_stream(stream, end=True), log.rank, str(log.path),
                              matcher.rules))


def _at_tail(hits: list[Hit]) -> list[Hit]:
    """Drop the end-of-file mark, and the tail hits of a file with an error line in it,
    with more than ``TAIL_LINES`` lines after them, or with a sign that the run went on
    (a ``past_tail`` line of the same rule) after them: a hang is what a log ends with."""
    end = max((h.line for h in hits if h.rule_id == END_ID), default=0)
    quiet = not any(_is_error(h) for h in hits)
    past = {h.rule_id[len(PAST_TAIL_PREFIX):]: h.line for h in hits
            if h.rule_id.startswith(PAST_TAIL_PREFIX)}
    return [h for h in hits if h.rule_id != END_ID and not h.rule_id.startswith(PAST_TAIL_PREFIX)
            and (not h.rule_id.startswith(TAIL_PREFIX) or _hangs_at(h, end, quiet, past))]


def _hangs_at(hit: Hit, end: int, quiet: bool, past: dict[str, int]) -> bool:
    rule_id = hit.rule_id[len(TAIL_PREFIX):]
    return quiet and end - hit.line <= TAIL_LINES and past.get(rule_id, 0) < hit.line


def _is_error(hit: Hit) -> bool:
    """A hit that is an error line (a rule's wording or an unknown error), not a hint."""
    return hit.rule_id not in (END_ID, LAST_ID, COLLECTIVE_DUMP_ID, FAILURE_SIGN_ID) and \
        not hit.rule_id.startswith(HINT_PREFIXES)


def place(raw: Iterable[RawHit], file_rank: int | None, name: str, rules: RuleSet) -> list[Hit]:
    """Give each raw hit its time and rank; rank-context lines set the rank after them.

    Rank order: the line's own prefix, a rank the message names, the rank of the
    torchelastic summary block it sits in, the rank in the file name. Only the first
    ``KEEP_PER_RANK`` hits of each rule and rank are kept (the verdict uses the
    earliest ones), so a log of millions of error lines stays in bounded memory.
    """
    placed: list[Hit] = []
    kept: dict[tuple[str, int | None], int] = {}
    context: tuple[int | None, int] = (None, 0)  # the summary block's rank, and its line
    last_time: float | None = None
    for item in raw:
        last_time = item.time if item.time is not None else last_time
        if item.rule_id == RANK_CONTEXT_ID:
            context = (rank_in_text(item.text), item.line)
            continue
        if item.rule_id in (END_ID, LAST_ID):
            placed.append(Hit(item.rule_id, None, None, name, item.line, item.text.strip(),
                              strong=False))
            continue
        # a repeated line keeps only its prefix's rank: who printed it (see repeated_hits)
        rank = item.rank if item.rule_id.startswith(REPEATED_PREFIX) else \
            _rank_of(item, context, file_rank, rules)
        seen = kept.get((item.rule_id, rank), 0)
        if seen >= KEEP_PER_RANK or len(kept) >= MAX_KEYS:
            continue
        kept[(item.rule_id, rank)] = seen + 1
        placed.append(Hit(item.rule_id, rank, item.time or last_time, name, item.line,
                          item.text.strip(), strong=item.strong, node=item.node,
                          span=item.span if rank == item.rank else ()))
    return placed


def _rank_of(item: RawHit, context: tuple[int | None, int], file_rank: int | None,
             rules: RuleSet) -> int | None:
    """A hit's rank (see :func:`place`). Inside a torchelastic summary block the block's
    ``rank : N`` names the failed rank; a prefix on the launcher's own lines (a tee, a
    label, the rank a flattened paste carried over) names only who printed it."""
    category = rules.by_id(item.rule_id).category if item.rule_id in rules.ids() else ""
    block, at = context
    if category == "launcher" and block is not None and 0 <= item.line - at <= SUMMARY_BLOCK:
        return block
    rank = item.rank
    if rank is None:
        rank = rank_in_text(item.text, category == "jax")
    if rank is None:
        rank = file_rank if block is None else block
    return rank


def _error_file_hits(log: LogFile, matcher: Matcher, info: RunInfo) -> list[Hit]:
    content = read_error_file(log.path)
    rank = _rank_of_local(content.local_rank, log.path, info)
    return [
        Hit(raw.rule_id, rank, content.time, str(log.path), 1, raw.text.strip(), strong=raw.strong)
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
    """The *first* rank to fail, by SIGKILL (host OOM) or SIGTERM/SIGHUP (stopped), is a cause."""
    failures = sorted(  # the launcher's own first failure, else the earliest
        (e for e in info.exits if e.exitcode != 0),
        key=lambda e: (not e.first, e.time if e.time is not None else math.inf, e.line),
    )
    if not failures or info.events_path is None:
        return []
    first = failures[0]
    where = str(info.events_path)
    if first.signal == "SIGKILL" or first.exitcode == -9:
        return [Hit(SIGKILL_RULE, first.rank, first.time, where, first.line, first.text)]
    if first.signal in ("SIGTERM", "SIGHUP") or first.exitcode in (-15, -1):
        return [Hit(STOPPED_RULE, first.rank, first.time, where, first.line, first.text,
                    derived=True)]
    return []


def _stall_hits(stalls: list[StallEvent]) -> list[Hit]:
    """distrun's own stall verdict (the watcher's ``stall_verdict``, else a culprit's ``stalled``)."""
    if not stalls:
        return []
    stall = next((s for s in stalls if s.verdict), stalls[0])
    rank = stall.ranks[0] if stall.ranks else None
    return [Hit(STALL_RULE, rank, stall.time, str(stall.file), stall.line, stall.message)]


def decide(
    hits: list[Hit],
    rules: RuleSet,
    info: RunInfo,
    failed_exits: tuple[RankExit, ...] = (),
    files: int = 0,
) -> Diagnosis:
    """Order the hits and pick the root cause (see the module docstring)."""
    signs = sorted((h for h in hits if h.rule_id == FAILURE_SIGN_ID), key=Hit.key)
    ends = tuple(h for h in hits if h.rule_id == LAST_ID)[:MAX_ENDS]
    found = _decide([h for h in hits if h.rule_id not in (FAILURE_SIGN_ID, LAST_ID)], rules,
                    info, failed_exits, files)
    if found.causes or found.unrecognised or info.job_exitcode == 0:  # 0: it did not fail
        return found
    found = replace(found, unrecognised=tuple(signs[:MAX_UNRECOGNISED]))
    return found if found.failed else replace(found, ends=ends)  # where a hung job stopped


def _decide(hits: list[Hit], rules: RuleSet, info: RunInfo,
            failed_exits: tuple[RankExit, ...], files: int) -> Diagnosis:
    hits = srun_teardown(hits, rules)
    dumps = [h for h in hits if h.rule_id == COLLECTIVE_DUMP_ID]
    hints = [h for h in hits if h.rule_id.startswith((TAIL_PREFIX, REPEATED_PREFIX))]
    hits = refine(sorted((h for h in hits if h.rule_id != COLLECTIVE_DUMP_ID
                          and not h.rule_id.startswith((TAIL_PREFIX, REPEATED_PREFIX))),
                         key=Hit.key), rules)
    known = [h for h in hits if h.rule_id != GENERIC_ERROR_ID]
    secondary = [h for h in known if rules.by_id(h.rule_id).kind == "secondary"]
    primary = [h for h in known if rules.by_id(h.rule_id).kind == "primary"]
    generic = _uncovered([h for h in hits if h.rule_id == GENERIC_ERROR_ID],
                         [h for h in primary if h.strong])
    derived = mismatch_hits(secondary) or dump_mismatch_hits(dumps)
    primary = sorted(primary + derived, key=lambda h: (not h.strong, h.key()))
    if not (primary or generic):
        primary = _stop_first(secondary, rules)
    if not (primary or generic):
        # a run whose record says it ended with 0 did not hang, whatever its logs end with
        primary = _from_hints(sorted(hints, key=Hit.key), bool(secondary) or info.job_exitcode == 0)
    if primary and (_weak_after_unknown(primary[0], generic)
                    or _weak_after_consequence(primary[0], secondary, rules)):
        primary = []  # a wording other failures share explains no error that came before it
    if primary:
        before = tuple(g for g in generic if g.key() < primary[0].key())[:MAX_UNRECOGNISED]
        causes = _with_summary_rank(_causes(primary, secondary, rules, info, bool(before)),
                                    secondary, rules)
        return Diagnosis(causes, before, failed_exits, files)
    if secondary and not (generic and generic[0].key() < secondary[0].key()):
        ordered = sorted(secondary, key=lambda h: (_secondary_rank(h, rules), h.key()))
        causes = _causes(ordered, [], rules, info, False)
        suspected = suspects(secondary, info)
        note = where_to_look(secondary, info, suspected) + silent_exits(suspected, info, hits)
        rank = _waited_for(causes[0], secondary, rules, suspected)
        # Consequences name no cause: medium at most, low when only weak wordings matched.
        level = max(causes[0].confidence, "medium", key=CONFIDENCES.index)
        # the node of the lines that waited is not the node of the rank they waited for
        node = causes[0].node if rank == causes[0].rank else \
            info.nodes.get(rank) if rank is not None else None
        causes = (replace(causes[0], confidence=level, note=note, rank=rank, node=node),
                  *causes[1:])
        return Diagnosis(causes, (), failed_exits, files)
    unknown = tuple(generic[:MAX_UNRECOGNISED])
    named = _summary_rank(secondary, rules)
    if unknown and unknown[0].rank is None and named is not None:
        unknown = (replace(unknown[0], rank=named), *unknown[1:])
    return Diagnosis((), unknown, failed_exits, files)


def srun_teardown(hits: list[Hit], rules: RuleSet) -> list[Hit]:
    """srun's report of tasks a signal ended is the step's teardown, not a cause, when it
    comes after srun's report of other tasks (the launcher's summary, naming its rank) or
    after a stop (the stop's evidence, naming no rank of its own). The teardown names no
    first failure: its tasks were signalled because another one had ended.

    srun reports every task's end once (src/srun launch.c ``_task_finish``); when a task
    fails, ``--kill-on-bad-exit`` signals the others, and a cancelled or timed-out step
    gets SIGTERM, then SIGKILL after KillWait: their "Terminated" and "Killed" follow.
    """
    if SUMMARY_RULE not in rules.ids() or STOPPED_RULE not in rules.ids():
        return hits
    reports = _first_where(hits, lambda h: _SRUN_REPORT.match(h.text) is not None)
    stops = _first_where(hits, lambda h: h.rule_id == STOPPED_RULE and h.strong)
    out: list[Hit] = []
    for hit in hits:
        at = (hit.line, hit.seq)
        report, stop = reports.get(hit.file, at), stops.get(hit.file, at)
        if _SRUN_SIGNAL.match(hit.text) is None or min(report, stop) >= at:
            out.append(hit)
        elif stop < report:  # the stop came first: all that follows is its teardown
            out.append(replace(hit, rule_id=STOPPED_RULE, strong=False, rank=None, span=()))
        else:  # derived: the report it follows names the first failure, not this one
            out.append(replace(hit, rule_id=SUMMARY_RULE, strong=False, derived=True))
    return out


def _first_where(hits: list[Hit], wanted: Callable[[Hit], bool]) -> dict[str, tuple[int, int]]:
    """Per file, the (line, seq) of the first hit that is ``wanted``."""
    first: dict[str, tuple[int, int]] = {}
    for hit in hits:
        if wanted(hit):
            first[hit.file] = min(first.get(hit.file, (hit.line, hit.seq)), (hit.line, hit.seq))
    return first


def _stop_first(secondary: list[Hit], rules: RuleSet) -> list[Hit]:
    """Only the launcher's summary, and the first failure it names is a SIGTERM or SIGHUP
    with nothing failing before it: the rank was stopped from outside (derived: medium)."""
    launcher = _launcher_lines(secondary, rules)
    if not launcher or len(launcher) < len(secondary) or STOPPED_RULE not in rules.ids() \
            or not stopped_first(launcher):
        return []
    first = min(launcher, key=Hit.key)
    return [replace(first, rule_id=STOPPED_RULE, rank=first_failure_rank(launcher),
                    strong=True, derived=True, span=())]


def _waited_for(cause: Cause, secondary: list[Hit], rules: RuleSet,
                suspected: list[int]) -> int | None:
    """The rank an only-consequences verdict names: the launcher's first failure, else the
    one rank the others waited for (``suspected``: :func:`suspects`), else the rank of the
    consequence itself."""
    named = _summary_rank(secondary, rules)
    if cause.rule.category == "launcher" and named is not None:
        return named
    return suspected[0] if len(suspected) == 1 else cause.rank


def _from_hints(hints: list[Hit], no_hang: bool) -> list[Hit]:
    """Logs with no cause and no unknown error: a line printed twice by two processes
    (derived; the consequences it leads to may follow), else, with no error line at all and
    nothing (consequences, a clean end in the run record) that rules out a hang, what a hung
    job printed last (a weak wording): the last such line first, the wait the job ended in
    (an earlier one is a step it went past)."""
    repeats = repeated_hits([h for h in hints if h.rule_id.startswith(REPEATED_PREFIX)])
    if repeats:
        return [replace(h, rule_id=h.rule_id[len(REPEATED_PREFIX):]) for h in repeats]
    if no_hang:
        return []
    return [replace(h, rule_id=h.rule_id[len(TAIL_PREFIX):], strong=False)
            for h in reversed(hints) if h.rule_id.startswith(TAIL_PREFIX)]


def _weak_after_unknown(best: Hit, generic: list[Hit]) -> bool:
    """The best cause is only a weak wording and an unrecognised error came before it."""
    return not best.strong and any(g.key() < best.key() for g in generic)


def _weak_after_consequence(best: Hit, secondary: list[Hit], rules: RuleSet) -> bool:
    """The best cause is only a weak wording printed after a strong collective consequence.

    A job torn down after a timeout or a lost peer prints shared wordings of its own
    (``Killed``, ``SIGTERM``, ``Connection refused``): they describe the teardown.
    """
    return not best.strong and any(
        h.strong and h.key() < best.key() and rules.by_id(h.rule_id).category != "launcher"
        for h in secondary)


def _launcher_lines(secondary: list[Hit], rules: RuleSet) -> list[Hit]:
    """The consequences that are the launcher's own failure summary."""
    return [h for h in secondary if rules.by_id(h.rule_id).category == "launcher"]


def _summary_rank(secondary: list[Hit], rules: RuleSet) -> int | None:
    """The rank the launcher's failure summary names (the first failure)."""
    return first_failure_rank(_launcher_lines(secondary, rules))


def refine(hits: list[Hit], rules: RuleSet) -> list[Hit]:
    """Context hits (frames) turn a cause near them into the rule that refines it. A cause
    found through a weak wording only stays weak (low confidence), and for it a weak wording
    of a rule that refines it is context too (``nvidia-smi: command not found`` near a
    ``CUDA driver version is insufficient``: no driver at all, not an old one)."""
    context = [(h, h.rule_id[len(CONTEXT_PREFIX):]) for h in hits
               if h.rule_id.startswith(CONTEXT_PREFIX)]
    rest = [h for h in hits if not h.rule_id.startswith(CONTEXT_PREFIX)]
    weak_context = [(h, h.rule_id) for h in rest
                    if not h.strong and h.rule_id in rules.ids() and rules.by_id(h.rule_id).refines]
    refined: list[Hit] = []
    for hit in rest:
        near = context if hit.strong else context + _one_way(hit, weak_context, rules)
        better = _refining(hit, near, rules) or _refined_in_place(hit, rules)
        refined.append(replace(hit, rule_id=better, derived=hit.strong) if better else hit)
    return refined


def _one_way(hit: Hit, weak: list[tuple[Hit, str]], rules: RuleSet) -> list[tuple[Hit, str]]:
    """The weak wordings that may refine ``hit``: not of a rule the hit's rule refines in
    turn (two such wordings say nothing about which of the two it is)."""
    own = rules.by_id(hit.rule_id).refines if hit.rule_id in rules.ids() else ()
    return [(c, rule_id) for c, rule_id in weak if rule_id not in own]


def _refining(hit: Hit, context: list[tuple[Hit, str]], rules: RuleSet) -> str | None:
    """The first rule whose context near ``hit`` (same file) refines the hit's rule."""
    return next((rule_id for c, rule_id in context
                 if c.file == hit.file and abs(hit.line - c.line) <= CONTEXT_LINES
                 and hit.rule_id in rules.by_id(rule_id).refines), None)


def _refined_in_place(hit: Hit, rules: RuleSet) -> str | None:
    """A rule whose context wording is on the cause's own line (``... on an npu machine``)."""
    for rule in rules.rule:
        if hit.rule_id in rule.refines and _context_regex(rule).search(hit.text):
            return rule.id
    return None


@lru_cache(maxsize=64)
def _context_regex(rule: Rule) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in rule.context))


def _with_summary_rank(
    causes: tuple[Cause, ...], secondary: list[Hit], rules: RuleSet
) -> tuple[Cause, ...]:
    """A root cause no line names a rank for takes the rank the launcher's summary names.

    A cause on another rank than the one the summary names is in doubt, unless the summary
    names that rank among the first failures too (srun reports the tasks of a node that
    ended together on one line: "node12: tasks 4-7: Exited with exit code 1").
    """
    root = causes[0]
    first = first_failure(_launcher_lines(secondary, rules))
    if first is None:
        return causes
    named, together = first
    if root.rank is None:
        return (replace(root, rank=named), *causes[1:])
    if root.rank != named and not any(h.rank == named for h in root.evidence):
        if any(low <= root.rank <= high for low, high in together):
            return causes
        # The launcher saw another rank fail first: this cause may be a consequence.
        level = max(root.confidence, "medium", key=CONFIDENCES.index)
        return (replace(root, confidence=level), *causes[1:])
    # The cause's own lines include the rank the summary names (a line that named
    # only the local rank came first): the summary's global rank is the one to name.
    return (replace(root, rank=named), *causes[1:])


def _secondary_rank(hit: Hit, rules: RuleSet) -> int:
    """The launcher's summary explains least; every other secondary comes first."""
    return 1 if rules.by_id(hit.rule_id).category == "launcher" else 0


def _uncovered(generic: list[Hit], primary: list[Hit]) -> list[Hit]:
    """Unknown error lines not next to a known cause in the same file.

    A consequence next to an unknown error does not explain it: the unknown
    error may well be the cause the consequence points at.
    """
    known: dict[str, list[int]] = {}
    for hit in primary:
        known.setdefault(hit.file, []).append(hit.line)
    return [
        g
        for g in generic
        if not any(abs(line - g.line) <= COVER_LINES for line in known.get(g.file, ()))
    ]


def _causes(
    ordered: list[Hit], consequences: list[Hit], rules: RuleSet, info: RunInfo, doubt: bool
) -> tuple[Cause, ...]:
    """Group hits by rule in order of first appearance; the first is the root cause."""
    groups: dict[str, list[Hit]] = {}
    for hit in ordered:
        groups.setdefault(hit.rule_id, []).append(hit)
    causes: list[Cause] = []
    for index, (rule_id, group) in enumerate(groups.items()):
        rank = next((h.rank for h in group if h.rank is not None), None)
        node = info.nodes.get(rank) if rank is not None else None
        node = node or next((h.node for h in group if h.node), None)
        after = _one_per_rank(consequences) if index == 0 else ()
        evidence = _evidence(group)
        rivals = index == 0 and any(
            h.strong and not h.derived for g in list(groups.values())[1:] for h in g)
        level = _capped(_confidence(group, index == 0 and (doubt or rivals)),
                        rules.by_id(rule_id).max_confidence)
        causes.append(Cause(rules.by_id(rule_id), rank, node, evidence, after, level))
    return tuple(causes)


def _confidence(group: list[Hit], doubt: bool) -> str:
    """low: weak wordings only; medium: in doubt (unknown errors first, another strong
    cause in the same logs) or derived (inferred from dumps, the run record, a context
    that refined it); high otherwise."""
    if not any(h.strong for h in group):
        return "low"
    if doubt or all(h.derived for h in group):
        return "medium"
    return "high"


def _capped(level: str, cap: str) -> str:
    return max(level, cap, key=CONFIDENCES.index)


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
