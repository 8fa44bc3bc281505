"""Consequences: what they prove, and where the cause they point at must be.

Two things are read from the consequence lines alone:

- a *collective mismatch* hidden in collective-timeout dumps: when the
  watchdog lines of different ranks show a different operation or different
  element counts for the same sequence number, the ranks issued different
  collectives, and the timeout is only how that shows;
- *where to look* when a log holds only consequences: the rank torchelastic's
  summary names as the first failure, the ranks a monitored barrier names, the
  ranks that did not report the timeout everyone else did.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import TypeVar

from distrun.diagnose.hit import Hit
from distrun.diagnose.sources import RunInfo

MISMATCH_RULE = "collective-mismatch"
TIMEOUT_RULE = "collective-timeout"
SUMMARY_RULE = "elastic-summary-no-root-cause"

_WORK = re.compile(r"SeqNum=(\d+), OpType=(\w+)(?:, NumelIn=(\d+), NumelOut=(\d+))?"
                   r"|OpType=(\w+)"
                   r"|(?:Timeout at NCCL work|detected by watchdog at work(?: sequence id)?): (\d+)")
_PG = re.compile(r"\[PG (?:ID )?(\d+)")
# Point-to-point work: pipeline stages legitimately wait in different sends and receives.
_P2P = {"SEND", "RECV", "_SEND", "_RECV", "RECVANYSOURCE"}
_ROOT_CAUSE = "Root Cause (first observed failure)"
# Open MPI / PRRTE's "The first process to do so was: Process name: [[jobid,1],RANK]"
_MPI_FIRST = re.compile(r"Process name: \[(?:\[\d+,\d+\]|[\w.-]+@\d+),(\d+)\]")
_ROOT_BLOCK_LINES = 10  # the Root Cause block: "[0]:", time, host, rank, exitcode, ...
_SUMMARY_RANK = re.compile(r"rank *: *(\d+) *\(local_rank")
# The ranks a consequence names as the one it waited for: a monitored barrier, a P2P wait,
# ProcessGroupNCCL's store wait for the communicator's id ("[14] is setting up NCCL
# communicator and retrieving ncclUniqueId from [0] via c10d key-value store ... possible
# application crash on rank 0"), whose line names its own rank first.
_BARRIER = re.compile(r"Ranks? ([\d, ]+?) failed to pass monitoredBarrier"
                      r"|waiting for send/recv from rank (\d+)"
                      r"|retrieving ncclUniqueId from \[(\d+)\]")

FIELDS = ("seq", "op", "numel")
K = TypeVar("K")


def mismatch_hits(secondary: list[Hit]) -> list[Hit]:
    """A derived collective-mismatch hit when ranks timed out in different collectives.

    A collective completes on every rank of its group or on none, so the oldest
    collective each rank is stuck in is the same one unless the ranks issued
    different ones: a different sequence number in one process group, a different
    operation, or different element counts. Each field is compared only between
    ranks whose lines state it (older torch prints no sequence number).
    """
    groups: dict[str, dict[int, dict[str, str]]] = {}
    first: dict[int, Hit] = {}
    for hit in secondary:
        found = _WORK.search(hit.text) if hit.rule_id == TIMEOUT_RULE else None
        if found is None or hit.rank is None:
            continue
        seq, op, n_in, n_out, bare_op, at = found.groups()
        if (op or bare_op) in _P2P:
            continue
        tag = _PG.search(hit.text)
        # Without a process-group tag (torch < 2.3) two ranks may be stuck in different
        # groups (tensor- and data-parallel), whose sequence numbers are unrelated: then
        # only the ranks at one sequence number are compared.
        group = f"pg {tag.group(1)}" if tag else f"seq {seq or at or ''}"
        known = groups.setdefault(group, {}).setdefault(hit.rank, {})
        for field, value in zip(FIELDS, (seq or at, op or bare_op, n_in and f"{n_in}/{n_out}"),
                                strict=True):
            if value:
                known.setdefault(field, value)
        first.setdefault(hit.rank, hit)
    for ranks in groups.values():
        odd = _odd_ranks(ranks)
        if odd:
            culprit = min((first[r] for r in odd), key=Hit.key)
            return [replace(culprit, rule_id=MISMATCH_RULE, derived=True)]
    return []


def _odd_ranks(ranks: dict[int, dict[str, str]]) -> list[int]:
    """The ranks whose stuck collective differs from the most common one, by any field."""
    for field in FIELDS:
        odd = _unusual({r: known[field] for r, known in ranks.items() if field in known})
        if odd:
            return odd
    return []


def _unusual(values: Mapping[K, Hashable]) -> list[K]:
    """The keys whose value is not the most common one (none when all agree)."""
    counts = Counter(values.values())
    if len(counts) < 2:
        return []
    usual = counts.most_common(1)[0][0]
    return [key for key, value in values.items() if value != usual]


_DUMP = re.compile(r"(?:([\w.-]+):(\d+):\d+ \[\d+\] )?NCCL INFO (\w+): opCount ([0-9a-f]+) "
                   r".*?count (\d+) datatype (\d+) op (\d+) root (\d+) (?:comm (\w+) )?"
                   r".*?\[nranks=(\d+)\]")
_DUMP_P2P = {"Send", "Recv", "SendRecv"}


def dump_mismatch_hits(dumps: list[Hit]) -> list[Hit]:
    """A derived collective-mismatch hit when NCCL's per-collective lines disagree.

    Every process of a communicator issues its collectives in the same order, so the
    n-th collective (opCount) of communicators of one size must have the same
    operation, element count, datatype, reduction and root on every process; the
    process (host:pid, else rank) whose n-th collective differs from the most common
    one issued a different collective. A size at which one process holds several
    communicators (tensor- and pipeline-parallel groups of two) is not compared: their
    n-th collectives are unrelated. Point-to-point lines are never compared.
    """
    calls: dict[tuple[str, str], dict[object, tuple[tuple[str, ...], Hit]]] = {}
    comms: dict[tuple[object, str], set[str]] = {}
    for hit in dumps:
        # A paste that lost its newlines (or lines a terminal rejoined) holds several.
        for found in _DUMP.finditer(hit.text):
            host, pid, op, op_count, count, dtype, redop, root, comm, nranks = found.groups()
            who: object = (host, pid) if pid else hit.rank
            if who is None or op in _DUMP_P2P:
                continue
            comms.setdefault((who, nranks), set()).add(comm or "")
            calls.setdefault((nranks, op_count), {}).setdefault(
                who, ((op, count, dtype, redop, root), hit))
    shared = {nranks for (_, nranks), seen in comms.items() if len(seen) > 1}
    for (nranks, _), by_process in calls.items():
        odd = [] if nranks in shared else _unusual(
            {who: call for who, (call, _) in by_process.items()})
        if odd:
            culprit = min((by_process[who][1] for who in odd), key=Hit.key)
            return [replace(culprit, rule_id=MISMATCH_RULE, derived=True, strong=True)]
    return []


def suspects(secondary: list[Hit], info: RunInfo) -> list[int]:
    """The ranks the others waited for: named by a monitored barrier or the launcher's
    summary, else the ranks of the run (or, in a pasted log, below the highest rank that
    timed out) that did not report the collective timeout the others did."""
    return (_named_suspects(secondary) or _recorded_first(info) or _silent_ranks(secondary, info)
            or _gap_ranks(secondary))


def _recorded_first(info: RunInfo) -> list[int]:
    """The rank distrun's run record names as the job's first failure."""
    return sorted({e.rank for e in info.exits if e.first and e.exitcode != 0})


def where_to_look(secondary: list[Hit], info: RunInfo, suspected: list[int]) -> str:
    """One sentence: these are consequences; the cause must be in this rank's log
    (``suspected``: :func:`suspects` of the same consequences)."""
    first = min(secondary, key=Hit.key)
    if suspected:
        ranks = ", ".join(str(r) for r in suspected)
        target = f"the log of rank {ranks}" if len(suspected) == 1 else f"the logs of ranks {ranks}"
        why = _why(secondary, info)
    elif _timed_out(secondary):
        waiting = _timed_out(secondary)
        ranks = ", ".join(str(r) for r in waiting)
        target = f"the logs of the ranks other than {ranks}"
        who = f"rank {ranks}" if len(waiting) == 1 else f"ranks {ranks}"
        why = f"{who} waited in a collective that another rank never joined"
    elif first.rank is not None:
        target, why = f"the log of rank {first.rank}", "the first rank that reported a failure"
    else:
        target, why = "each rank's own log", "these lines do not say which rank failed first"
    return (f"only consequences in these logs (no root cause): look in {target} ({why}); "
            "with distrun launch, logs/rank-<R>.log")


def silent_exits(suspected: list[int], info: RunInfo, hits: list[Hit]) -> str:
    """What the run record adds for a suspected rank that left no error line anywhere:
    it ended with an exit code of its own (not a signal) and printed nothing first, so
    its log will not show a cause either (an explicit exit, or a crash that printed nothing)."""
    spoke = {h.rank for h in hits if h.rule_id != SUMMARY_RULE}  # the summary speaks of it
    quiet = [e for e in info.exits
             if e.rank in suspected and e.exitcode > 0 and e.signal is None and e.rank not in spoke]
    return "".join(f"; rank {e.rank} ended with exit code {e.exitcode} and printed no error before it "
                   "(an explicit sys.exit/os._exit with that code, or a crash that printed nothing)"
                   for e in quiet)


def _timed_out(secondary: list[Hit]) -> list[int]:
    return sorted({h.rank for h in secondary if h.rule_id == TIMEOUT_RULE and h.rank is not None})


def _named_suspects(secondary: list[Hit]) -> list[int]:
    for hit in secondary:
        found = _BARRIER.search(hit.text)
        if found is not None:
            named = next(group for group in found.groups() if group is not None)
            return [int(r) for r in re.findall(r"\d+", named)]
    first = first_failure_rank([h for h in secondary if h.rule_id == SUMMARY_RULE])
    return [] if first is None else [first]


def first_failure_rank(summary: list[Hit]) -> int | None:
    """The rank a launcher's failure summary names as the first failure (see
    :func:`first_failure`)."""
    first = first_failure(summary)
    return first[0] if first is not None else None


def first_failure(summary: list[Hit]) -> tuple[int, tuple[tuple[int, int], ...]] | None:
    """The rank a launcher's failure summary names as the first failure, and the ranges of
    all the ranks its line names as failing with it (srun's "tasks 2-7": one report).

    torchelastic lists the other failures first and the root cause last, under
    ``Root Cause (first observed failure):``; the rank named after that line wins,
    else the process Open MPI names as the first to exit non-zero, else the first rank
    any summary line names (older torch put ``Root Cause:`` first, srun names one rank
    per line in order).
    """
    roots = [(h.file, h.line, h.seq) for h in summary if _ROOT_CAUSE in h.text]
    named = _rank_after_root_cause(summary)
    if named is None:
        named = next((int(m.group(1)) for h in summary if (m := _MPI_FIRST.search(h.text))),
                     None)
    if named is not None:
        return named, ((named, named),)
    # a derived summary line (srun's teardown after another task's report) names no first failure
    ranked = [h for h in summary if h.rank is not None and not h.derived]
    # (line, seq): the pieces of one pasted line share its number and keep their order
    after = [h for h in ranked
             if any(h.file == f and (h.line, h.seq) > (line, seq) for f, line, seq in roots)]
    chosen = after or ranked
    if not chosen or chosen[0].rank is None:
        return None
    return chosen[0].rank, chosen[0].span or ((chosen[0].rank, chosen[0].rank),)


def _rank_after_root_cause(summary: list[Hit]) -> int | None:
    """The ``rank : N (local_rank: M)`` written after the Root Cause heading, read from
    the text itself: in a paste flattened onto one line every piece has the same line
    number, and the pieces' own ranks come from whichever block came last."""
    ordered = sorted(summary, key=lambda h: (h.file, h.line, h.seq))
    for index, hit in enumerate(ordered):
        start = hit.text.find(_ROOT_CAUSE)
        if start < 0:
            continue
        for later in ordered[index:]:
            if later.file != hit.file or later.line - hit.line > _ROOT_BLOCK_LINES:
                break
            text = later.text[start + len(_ROOT_CAUSE):] if later is hit else later.text
            found = _SUMMARY_RANK.search(text)
            if found is not None:
                return int(found.group(1))
            if later is not hit and _ROOT_CAUSE in later.text:
                break
    return None


_EXITCODE = re.compile(r"exitcode *: *(-?[0-9]+)|failed \(exitcode: (-?[0-9]+)\)")
STOP_CODES = (-15, -1)  # SIGTERM, SIGHUP


def stopped_first(summary: list[Hit]) -> bool:
    """The launcher's summary says its first failure was a stop (SIGTERM or SIGHUP) and
    every exit code it reports is one: nothing failed before a process was stopped.

    The first failure is the exit code in torchelastic's Root Cause block, else in the
    agent's "failed (exitcode: N) local_rank: ..." line (the first failure by time).
    torchelastic's own SIGTERM to the other workers after a failure comes after that
    failure, so it is never the first one.
    """
    ordered = sorted(summary, key=lambda h: (h.file, h.line, h.seq))
    codes = [int(m.group(1) or m.group(2)) for h in ordered for m in _EXITCODE.finditer(h.text)]
    if not codes or any(code not in STOP_CODES for code in codes):
        return False
    roots = [i for i, h in enumerate(ordered) if _ROOT_CAUSE in h.text]
    block = ordered[roots[0]:] if roots else ordered
    return any(_EXITCODE.search(h.text) for h in block[:_ROOT_BLOCK_LINES])


def _silent_ranks(secondary: list[Hit], info: RunInfo) -> list[int]:
    """Ranks of the run that did not report the collective timeout the others did."""
    reported = {h.rank for h in secondary if h.rule_id == TIMEOUT_RULE and h.rank is not None}
    world = set(info.nodes)
    if not reported or not world:
        return []
    return sorted(world - reported)


def _gap_ranks(secondary: list[Hit]) -> list[int]:
    """In a pasted log with no run record: the ranks below the highest one that timed out
    which did not report the timeout (ranks count from 0; two or more waiters needed)."""
    waiting = _timed_out(secondary)
    if len(waiting) < 2:
        return []
    return sorted(set(range(max(waiting) + 1)) - set(waiting))


def _why(secondary: list[Hit], info: RunInfo) -> str:
    if any(_BARRIER.search(h.text) for h in secondary):
        return "the ranks that waited name it: a monitored barrier, a send/recv or the NCCL " \
            "communicator's set-up"
    if any(h.rule_id == SUMMARY_RULE and h.rank is not None for h in secondary):
        return "torchelastic's summary names it as the first failure"
    if _recorded_first(info):
        return "the run record names it as the first failure"
    return "it did not report the timeout the other ranks did: it was elsewhere or dead"


def repeated_hits(hints: list[Hit]) -> list[Hit]:
    """Derived hits where one file holds the same once-per-process line twice.

    A line each process prints once with its own rank (Lightning's "GLOBAL_RANK: 1,
    MEMBER: 2/8") printed twice means two processes claim one rank: the scheduler
    started more processes than the world size. A tee or a copy repeats a line on the
    next line with the same rank prefix: such a pair does not count. Nor does a line
    that comes again after every member of its world ("MEMBER: k/N" for N members) was
    seen: that is the next run appended to the same log (a re-run, a requeued job), not
    two processes in one. The hit keeps the rank of the prefix on the second line (the
    process that claims a taken rank).
    """
    seen: dict[tuple[str, str, str], Hit] = {}
    found: list[Hit] = []
    for hit in sorted(hints, key=lambda h: (h.file, h.line)):
        key = (hit.file, hit.rule_id, hit.text)
        before = seen.get(key)
        if before is not None and _world_complete(seen, hit):
            seen = {k: v for k, v in seen.items() if k[:2] != key[:2]}
            before = None
        seen[key] = hit
        if before is None:
            continue
        copied = hit.line - before.line == 1 and hit.rank is not None and hit.rank == before.rank
        if not copied:
            found.append(replace(hit, derived=True, strong=True))
    return found


_MEMBER = re.compile(r"MEMBER: \d+/(\d+)")


def _world_complete(seen: Mapping[tuple[str, str, str], Hit], hit: Hit) -> bool:
    """Every member of ``hit``'s world has printed its line in this file already."""
    world = _MEMBER.search(hit.text)
    members = {k[2] for k in seen if k[:2] == (hit.file, hit.rule_id)}
    return world is not None and len(members) >= int(world.group(1))
