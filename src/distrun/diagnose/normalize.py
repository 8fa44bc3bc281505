"""Log lines as people paste them: decoration off, the rank named.

A raw line may carry, in any nesting: a timestamp, ANSI colour codes, the
prefix its launcher wrote (``[rank3]:``, ``[default3]:``, ``[1,3]<stderr>:``,
``node12: task 5:``, ``srun -l``'s ``5:``, a pdsh host name), and, in a
one-line paste, several lines joined with a literal ``\\n``. This module turns
one raw line into its *logical* lines: the text the rules match, and the rank
and node the prefixes name.

Only matched lines are normalised on big logs; small pasted logs are
normalised whole so that lines wrapped by a terminal can be joined (see
:mod:`distrun.diagnose.matcher`). Before that, :func:`unwrap` rejoins a small
log hard-wrapped at one width (a terminal's cut mid-word, a web page's or an
editor's wrap at word boundaries), keeping line numbers; where too few lines
tell a wrap, it passes a line's prefix on to the rest a wrap cut off, so the
rank it names is kept.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from distrun.model.terminal import strip_control

MAX_LINE = 64 * 1024  # characters of one logical line that are considered
Span = tuple[tuple[int, int], ...]  # ranges of ranks, first to last
_TASK_RANGE = re.compile(r"(\d+)(?:-(\d+))?")

_PARTS = re.compile(r"\\r\\n|\\n|\r")
_TIMESTAMP = re.compile(
    r"\[?\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"
    r"(?:\s+(?:out|err)\b)?[\s:,-]*"
)
# HTML character references in text copied from a web page's source.
_ENTITIES = {"&#39;": "'", "&#x27;": "'", "&quot;": '"', "&lt;": "<", "&gt;": ">",
             "&amp;": "&", "&#34;": '"', "&nbsp;": " "}
_ENTITY = re.compile("|".join(re.escape(e) for e in _ENTITIES))
_DASH_OPTION = re.compile("(?<![^\\s])[\u2013\u2014](?=[A-Za-z])")
# What a paste through a forum, a chat or a word processor makes of the program's ASCII:
# typographic quotes and primes, no-break and other Unicode spaces, zero-width characters
# and byte-order marks, and the full-width forms of a CJK input method ("报错：RuntimeError").
# One character for one (zero-width ones go): a terminal's wrap is found by line widths.
# The one exception: an option's "--" that became an en or em dash ("srun –gpus-per-task").
_TYPOGRAPHY = str.maketrans(
    {**dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u02bc", "'"),
     **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
     **dict.fromkeys("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                     "\u2009\u200a\u202f\u205f\u3000", " "),
     **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff"),
     **{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}})
# A line this long with no newline may be a paste that lost them: it is cut before the
# starts of records (a traceback, an exception, a timestamp, a rank or launcher prefix,
# a logger's level, torchelastic's summary blocks). A shorter line is cut only before the
# starts no message has inside it (a traceback, a rank prefix, a logger's "ERROR:name:").
FLAT_LINE = 400
_STARTS = (r"Traceback \(most recent call last\)|\[(?:rank|default)\d+\]:"
           r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:|\[?\d{4}-\d\d-\d\d[T ]\d\d:")
_RECORD = re.compile(
    rf" (?={_STARTS}|[A-Za-z_][\w.]*(?:Error|Exception|Interrupt): |srun: |slurmstepd: "
    r"|[EWI]\d{4} \d\d:|Killed$|(?:[\w.-]+:)?[\w.-]+:\d+:\d+ \[\d+\] |Root Cause \(|\[\d+\]: +time +:"
    r"|[Ii]nitializing (?:ddp|distributed): GLOBAL_RANK: |[\w.-]+: error: )"
)
_SHORT_RECORD = re.compile(rf" (?={_STARTS})")
_SRUN_REPORT = re.compile(
    r"srun: error: ([\w.\[\],-]+): (tasks? (\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*):\s?)")
# What srun's report says of how its tasks ended (_task_finish: "Exited with exit code %d",
# "Out Of Memory", strsignal() of the signal that ended them): the report keeps its "task(s)
# N:" (the rank is read from it too), since a bare "Killed" or "Terminated" says nothing of
# who printed it; the host name goes (it is no part of the message). SRUN_SIGNALS: the
# statuses that are the name of a signal (strsignal) rather than the task's own end.
SRUN_SIGNALS = "Killed|Terminated|Hangup"
SRUN_STATUSES = rf"Exited with exit code [0-9]+|Out Of Memory|{SRUN_SIGNALS}"
_SRUN_STATUS = re.compile(rf"(?:{SRUN_STATUSES})$")
# Leading prefixes: (regex, group of the rank, group of the node).
_PREFIXES: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"\[(?:rank|default)(\d+)\]:\s?"), 1, 0),
    # Lightning's [rank: 3], loggers' [RANK 3] / [rank=3] / [RANK:3]
    (re.compile(r"\[(?:rank|Rank|RANK)(?::\s?|=|\s)(\d+)\]:?\s?"), 1, 0),
    (re.compile(r"\[(\d+),(\d+)\]<std(?:out|err)>:\s?"), 2, 0),  # Open MPI --tag-output
    # Ray actors (older Ray: no actor name) and vLLM workers: (TaskRunner pid=4), (pid=4),
    # (VllmWorker rank=3 pid=4)
    (re.compile(r"\((?:[\w.-]+ )?(?:rank=(\d+) )?pid=\d+(?:, ip=[\d.]+)?\)\s?"), 1, 0),
    # vLLM / SGLang logger: ERROR 07-17 08:06:53 [multiproc_executor.py:487]
    (re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
                r"\[?[\w.-]+:\d+\]\s?"), 0, 0),
    (re.compile(r"\[(\d+)\]<std(?:out|err)>:\s?"), 1, 0),  # horovodrun
    (re.compile(r"\[pod/([\w.-]+)/[\w.-]+\]\s?"), 0, 1),  # kubectl logs --prefix
    # syslog / journalctl: "May 01 12:00:00 gpu-node-7 python3[41234]: "
    (re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d ([\w.-]+) [\w./@-]+(?:\[\d+\])?: "), 0, 1),
    (re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w./-]+:\d+\]\s?"), 0, 0),  # glog
    (re.compile(r"(?:>[ \t]?)+(?=\S)|[\u2502\u2503][ \t]"), 0, 0),  # Markdown quote, rich box
    (re.compile(r"`+(?=\S)"), 0, 0),  # a Markdown code span around a pasted line
    # Python logging's "%(asctime)s - %(name)s - %(levelname)s - " after its timestamp,
    # and a Markdown list dash
    (re.compile(r"-\s(?:[\w.]+\s-\s)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s-\s)?(?=\S)"), 0, 0),
    (re.compile(r"[\w.]+\s-\s(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s-\s"), 0, 0),
    # "%(asctime)s - %(levelname)s - " (the stamp and its dash peeled already)
    (re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s-(?:\s|$)"), 0, 0),
    # srun's report of a node's tasks that ended together (src/srun launch _task_finish:
    # "%s: %s %s: Exited with exit code %d", hosts, "task"/"tasks", the task list "2-7,9")
    (_SRUN_REPORT, 3, 1),
    (re.compile(r"([\w.-]+): task (\d+):\s?"), 2, 1),
    (re.compile(r"\[(\d+)\]:\s?(?=\S)"), 1, 0),  # torchelastic --tee (older torch)
    (re.compile(r"(\d{1,5}):[ \t]+(?=\S)"), 1, 0),  # srun --label (the line may be indented)
    (re.compile(r"([A-Za-z][\w.-]*):\s(?=\[(?:rank|default)\d+\]|\[\d+,\d+\]<std)"), 0, 1),  # pdsh
)
# pdsh (DeepSpeed's multi-node runner) starts every line a node printed with "host: ", and
# before torch 2.2 no rank prefix follows it. One line cannot tell "gpu003: Traceback" from
# "RuntimeError: ...", so a pdsh host is a name that starts at least PDSH_LINES lines of
# the log (pdsh_hosts), spelled as a host name with a digit, dot or hyphen in it (gpu003,
# worker-1, 10.0.0.7) and not an exception's name; only those names are peeled.
PDSH_LINES = 3
_HOST = r"([A-Za-z0-9][A-Za-z0-9.-]*): "
_HOST_HEAD = re.compile(_HOST)
_HOST_LINES = re.compile(f"^{_HOST}", re.MULTILINE)
_HOST_LIKE = re.compile(r"[\d.-]")
_NOT_HOST = re.compile(r"(?:Error|Exception|Warning|Interrupt|Exit)$")
Hosts = frozenset[str]
# One pass that tells whether any prefix starts at a position (most lines have none).
_ANY_PREFIX = re.compile("|".join(f"(?:{regex.pattern})" for regex, _, _ in _PREFIXES))
# Ranks named inside the text, most specific first.
_IN_TEXT = (
    # distrun's own HANG line (monitor.hang: "rank 2 has not entered collective #5 ..." /
    # "ranks 1, 3 have not entered ..." / "...: rank 1 entered a different op or shape")
    re.compile(r"\branks? (\d+)(?:, \d+)* (?:has not entered|have not entered|entered a "
               r"different op)"),
    re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]"),
    re.compile(r"\brank\s*:\s*(\d+)\s*\(local_rank"),
    re.compile(r"\bprocess_id\s*[=:]\s*(\d+)"),
    re.compile(r"\blocal_rank\s*:\s*(\d+)"),
    re.compile(r"\bRank (\d+)\b"),
    re.compile(r"\bRANK[ :=]\s?(\d+)\b"),
    re.compile(r"\brank=(\d+)\b"),
    re.compile(r"\[rank(\d+)\]"),
    re.compile(r"\bRankID:\s?(\d+)"),  # Ascend CANN
    re.compile(r"\b[Pp]rocess (\d+) (?:terminated|exited|exit) with"),  # mp.spawn, horovodrun
    # launchers naming the failed rank: horovod runner/gloo_run.py ("Terminating remaining
    # workers after failure of Process 2."), PaddlePaddle fleet launch_utils.py ("the trainer
    # process with rank=[2, 3] was aborted", a list), MosaicML composer cli/launcher.py
    # ("Global rank 3 (PID 4242) exited with code 1")
    re.compile(r"after failure of Process (\d+)"),
    re.compile(r"process with rank=\[(\d+)"),
    re.compile(r"\bGlobal rank (\d+) \(PID \d+\)"),
    # ProcessGroupNCCL's store wait names its own rank first, then the one it waited for
    # ("[14] is setting up NCCL communicator ... possible application crash on rank 0")
    re.compile(r"\[(\d+)\] is setting up NCCL communicator"),
    re.compile(r"\b(?:process|on) rank (\d+)\b"),  # Open MPI: mpirun noticed / MPI_ABORT
    re.compile(r"--local_rank=(\d+)"),  # DeepSpeed launcher's command lines
    re.compile(r"zero_pp_rank_(\d+)_"),  # DeepSpeed shard files
    re.compile(r"\[(\d+)\]: params\["),  # DDP's parameter check across processes
)
# A shell's environment assignments: one after "export", or two or more in a row.
_SHELL_ENV = re.compile(r"\bexport\s+[A-Z_][A-Z0-9_]*=\S*"
                        r"|\b[A-Z_][A-Z0-9_]*=\S*(?:\s+[A-Z_][A-Z0-9_]*=\S*)+")
# JAX names tasks and processes; only trusted on JAX lines (a pid is a "process" too).
_JAX_IN_TEXT = (re.compile(r"/task:(\d+)"), re.compile(r"\b[Pp]rocess (\d{1,4})\b(?! closing)"))


@dataclass(frozen=True)
class Logical:
    """One logical line: what the rules match, and the rank/node its prefixes named."""

    text: str
    rank: int | None = None
    node: str | None = None
    span: Span = ()  # every rank the prefix names (srun's "tasks 2-7,9"), when more than one


def clean(raw: str) -> str:
    """A JSON log record's message, without ANSI codes, HTML character references and a
    paste's typography, the length capped (a record's lines end in ``\\r``)."""
    record = structured(raw)
    if record is not None:
        raw = "\r".join(record.splitlines())
    raw = strip_control(raw)
    if not raw.isascii():
        raw = _DASH_OPTION.sub("--", raw.translate(_TYPOGRAPHY))
    if "&" in raw and ";" in raw:
        raw = _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], raw)
    return raw[:MAX_LINE]


def windows(raw: str) -> tuple[str, ...]:
    """The parts of one raw line that are read: all of it, or, for a line over ``MAX_LINE``,
    its first and its last ``MAX_LINE`` characters (after a progress bar's carriage returns
    the error a terminal shows last is at the line's end)."""
    return (raw,) if len(raw) <= MAX_LINE else (raw[:MAX_LINE], raw[-MAX_LINE:])


def pdsh_hosts(text: str) -> Hosts:
    """The pdsh host names that start lines of ``text`` (see ``PDSH_LINES``)."""
    counts = Counter(found.group(1) for found in _HOST_LINES.finditer(text))
    return frozenset(host for host, lines in counts.items() if lines >= PDSH_LINES
                     and _HOST_LIKE.search(host) and not _NOT_HOST.search(host))


def logical_lines(raw: str, hosts: Hosts = frozenset()) -> list[Logical]:
    """The logical lines of one raw line (several for a literal-``\\n`` paste, or for a
    long paste whose newlines were lost: split where a new record starts); ``hosts``:
    the log's pdsh hosts, peeled as prefixes too."""
    text = clean(raw)
    named: Logical | None = None  # the last part whose prefix named a rank
    if "\\n" in text or "\r" in text:
        parts = _PARTS.split(text)
    elif len(text) > FLAT_LINE or _SHORT_RECORD.search(text):
        # The line's own prefixes name the rank of every record in it.
        outer = strip_prefixes(text, hosts)
        named = outer if outer.rank is not None else None
        parts = (_RECORD if len(text) > FLAT_LINE else _SHORT_RECORD).split(outer.text)
    else:
        parts = [text]
    lines: list[Logical] = []
    for part in parts:
        line = strip_prefixes(part, hosts)
        if line.rank is not None:
            named = line
        elif named is not None:
            line = Logical(line.text, named.rank, line.node or named.node, named.span)
        if line.text.strip():
            lines.append(line)
    return lines or [Logical("")]


# The message of a structured log record: Docker's json-file and Fluent Bit ("log"),
# journalctl -o json ("MESSAGE"), Cloud Logging ("textPayload", "jsonPayload.message"),
# ECS, Logstash and most JSON loggers ("message", "msg").
_MESSAGE_KEYS = ("log", "message", "msg", "MESSAGE", "textPayload", "Message")


def structured(text: str) -> str | None:
    """The message of one JSON log record (``{"log": "...", "stream": ...}``), or None for
    any other line (most lines: the first character tells)."""
    if "{" not in text[:16]:
        return None
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        record = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than any log record
        return None
    if not isinstance(record, dict):
        return None
    for holder in (record, *(v for v in record.values() if isinstance(v, dict))):
        for key in _MESSAGE_KEYS:
            message = holder.get(key)
            if isinstance(message, str):
                return message[:MAX_LINE]
    return None


def strip_prefixes(text: str, hosts: Hosts = frozenset()) -> Logical:
    """Peel timestamps and launcher prefixes off the front (and the log's pdsh ``hosts``);
    the innermost rank wins."""
    pos, rank, node, span = _peel(text, hosts)
    return Logical(text[pos:].rstrip().rstrip("`\u2502\u2503").rstrip(), rank, node, span)


def _peel(text: str, hosts: Hosts = frozenset()) -> tuple[int, int | None, str | None, Span]:
    """Where the message starts after the leading prefixes, and the rank(s) and node they name."""
    rank: int | None = None
    node: str | None = None
    span: Span = ()
    pos = len(text) - len(text.lstrip())
    for _ in range(8):
        found, rank_group, node_group = _first_prefix(text, pos)
        if found is None and hosts:
            found, rank_group, node_group = _host_prefix(text, pos, hosts), 0, 1
        if found is None:
            break
        if rank_group and found.group(rank_group) is not None:
            rank, span = task_list(found.group(rank_group))
        if node_group:
            node = found.group(node_group)
        if found.re is _SRUN_REPORT and _SRUN_STATUS.match(text, found.end()):
            return found.start(2), rank, node, span  # srun's report of the tasks' end
        pos = found.end()
        pos += len(text) - pos - len(text[pos:].lstrip())
    return pos, rank, node, span


def task_list(spec: str) -> tuple[int, Span]:
    """The first rank of a task list (``5``, ``2-7``, ``8-13,15``) and, when it names more
    than one, its ranges."""
    ranges = tuple((int(a), int(b or a)) for a, b in _TASK_RANGE.findall(spec))
    many = len(ranges) > 1 or ranges[0][0] != ranges[0][1]
    return ranges[0][0], ranges if many else ()


def _first_prefix(text: str, pos: int) -> tuple[re.Match[str] | None, int, int]:
    stamp = _TIMESTAMP.match(text, pos)
    if stamp is not None and stamp.end() > pos:
        return stamp, 0, 0
    if _ANY_PREFIX.match(text, pos) is None:
        return None, 0, 0
    for regex, rank_group, node_group in _PREFIXES:
        found = regex.match(text, pos)
        if found is not None:
            return found, rank_group, node_group
    return None, 0, 0


def _host_prefix(text: str, pos: int, hosts: Hosts) -> re.Match[str] | None:
    found = _HOST_HEAD.match(text, pos)
    return found if found is not None and found.group(1) in hosts else None


def rank_in_text(text: str, jax: bool = False) -> int | None:
    """A rank the message itself names (``[Rank 3]``, ``rank: 3 (local_rank``, ...); not a
    shell's environment (``export RANK=0``, ``NNODES=2 RANK=1 torchrun ...``, pasted on the
    error's line), which says how a command was started, not which process failed."""
    if "=" in text:
        text = _SHELL_ENV.sub(" ", text)
    for regex in _IN_TEXT + (_JAX_IN_TEXT if jax else ()):
        found = regex.search(text)
        if found is not None:
            return int(found.group(1))
    return None


# Hard wraps: a terminal cuts every line at its width (mid-word); an editor or a web page
# wraps at the last space before it. Either way the longest lines pile up at the width.
WRAP_COLUMNS = (40, 240)
_AMBIGUOUS = re.compile(r"[\d:>`\s-]{1,8}")  # prefixes a cut's rest may start like ("192: ")
_NEAR = 12  # an editor's wrapped line ends this close to the width
_SAME_START = 20  # a next line that begins with this many of a line's characters is a new one
# NCCL's header "host:pid:tid [dev] ", also after a grep file prefix ("LOG1.3.txt:host:...")
_NCCL_HEAD = re.compile(r"(?:[\w.-]+:)?[\w.-]+:\d+:\d+ \[\d+\] ")
_NEW_RECORD = re.compile(rf"{_STARTS}|During handling|The above exception|File \""
                         r"|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt):"
                         r"|srun: |slurmstepd: |" + _NCCL_HEAD.pattern)


def unwrap(text: str) -> str:
    """``text`` with hard-wrapped lines joined again; the line count is kept (a joined
    line's continuations become empty lines) so that line numbers stay the file's."""
    lines = [clean(line).rstrip("\r") for line in text.split("\n")]  # colours off
    widths = [len(line) for line in lines]
    hosts = pdsh_hosts(text)
    mode = _wrap_mode(lines, widths, hosts)
    if mode is None:
        return _carry_prefixes(text, lines, widths, hosts)
    width, cut = mode
    out = list(lines)
    head = 0
    for index in range(1, len(lines)):
        glue = _glue(lines[index - 1], widths[index - 1], lines[index], width, cut=cut,
                     hosts=hosts)
        if glue is None:
            head = index
            continue
        if glue == " ":  # a page breaks at a space: one, whether or not the line kept it
            out[head] = out[head].rstrip(" ")
        out[head] += glue + _rest(lines[index - 1], lines[index], hosts)
        out[index] = ""
    return "\n".join(out)


def _rest(line: str, following: str, hosts: Hosts) -> str:
    """``following`` without the decoration it shares with ``line``: the same prefix, or a
    Markdown quote put on every line after the text was wrapped."""
    prefix = _prefix(following, hosts)
    if prefix and prefix == _prefix(line, hosts):
        return following[len(prefix):]
    if following.startswith(">") and line.startswith(">"):
        return following[2:] if following.startswith("> ") else following[1:]
    return following


def _wrap_mode(lines: list[str], widths: list[int], hosts: Hosts) -> tuple[int, bool] | None:
    """(width, cut mid-word) when the text looks wrapped at a width; None: it does not.

    A terminal's cut: lines pile up at exactly the width. A page's wrap: where a long
    line is followed by more of its text, the next word would not have fit, more often
    than not (a line that ends early though the next word would fit is a real line end).
    """
    width = _wrap_width(widths)
    if width is None:
        return None
    # Lines at the width that could be cut: more text follows (not a new prefixed record).
    exact = {i for i in range(len(lines) - 1)
             if widths[i] == width and _cut_rest(lines[i], lines[i + 1], hosts)}
    # Shorter lines the way a page breaks them: the next word would not have fit.
    long = [i for i in range(len(lines) - 1) if widths[i] >= width // 2]
    fits = {i: _word_fits(lines[i], widths[i], lines[i + 1], width, hosts) for i in long}
    breaks = sum(1 for i, fit in fits.items() if fit is False and i not in exact)
    if len(exact) >= 2 and len(exact) > breaks:
        return width, True
    # A page's wrap: lines near the width (after any line, a long word would not fit).
    wrapped = {i for i, fit in fits.items() if fit is False and widths[i] >= width - 2 * _NEAR}
    if len(wrapped) >= 2 and len(wrapped) > sum(map(bool, fits.values())):
        return width, False
    return None


def _wrap_width(widths: list[int]) -> int | None:
    """The longest line's width, where a terminal or a page could have wrapped at it."""
    width = max(widths, default=0)
    return width if WRAP_COLUMNS[0] <= width <= WRAP_COLUMNS[1] else None


def _carry_prefixes(text: str, lines: list[str], widths: list[int], hosts: Hosts) -> str:
    """Too few lines to tell a wrap (a pasted line or two): where a prefixed line at the
    width is followed by more text without the prefix, that text gets the prefix (the
    matcher joins the two; the rank the prefix names is kept)."""
    width = _wrap_width(widths)
    if width is None:
        return text
    out = list(lines)
    for i in range(len(lines) - 1):
        full = widths[i] == width or (widths[i] >= width - 2 * _NEAR and _word_fits(
            lines[i], widths[i], lines[i + 1], width, hosts) is False)
        if full and _drops_prefix(out[i], lines[i + 1], hosts):
            out[i + 1] = _prefix(out[i], hosts) + _rest(out[i], lines[i + 1], hosts)
    return text if out == lines else "\n".join(out)


def _drops_prefix(line: str, following: str, hosts: Hosts) -> bool:
    """``line`` has prefixes, ``following`` (more text, not a new record) has none of its
    own (only, at most, the outer part of the line's, such as a Markdown quote)."""
    rest, own, mine = following.lstrip(), _prefix(following, hosts), _prefix(line, hosts)
    outer = not own or (own != mine and mine.startswith(own))  # none, or a quote on every line
    return bool(mine) and rest == following and bool(rest) and outer \
        and _NEW_RECORD.match(rest[len(own):]) is None


@lru_cache(maxsize=1024)
def _prefix(line: str, hosts: Hosts = frozenset()) -> str:
    """The line's leading prefixes ("" when only blanks lead it)."""
    prefix = line[: _peel(line, hosts)[0]]
    return prefix if prefix.strip() else ""


def _cut_rest(line: str, following: str, hosts: Hosts) -> bool:
    """Can ``following`` be the rest of ``line`` cut at the width? It may start like a short
    prefix ("192: "); it is no copy of the line (a message every rank printed) and no NCCL
    line of another process."""
    prefix = _prefix(following, hosts)
    return bool(following.strip()) and not _same_start(line, following) and (
        not prefix or _AMBIGUOUS.fullmatch(prefix) is not None) and (
        _NCCL_HEAD.match(following) is None)


def _same_start(line: str, following: str) -> bool:
    """``following`` begins as ``line`` does (its first ``_SAME_START`` characters, not
    blanks): another line of the same form (every rank's watchdog line), not the cut rest."""
    start = line[:_SAME_START]
    return len(start) == _SAME_START and bool(start.strip()) and following.startswith(start)


def _word_fits(line: str, length: int, following: str, width: int,
               hosts: Hosts) -> bool | None:
    """Would the first word of ``following`` have fit on ``line``? None: ``following``
    is not more text (an empty line, a new record, an indented line)."""
    prefix = _prefix(following, hosts)
    body = following[len(prefix):]
    if following.lstrip().startswith("```"):
        return None  # a Markdown fence
    mine = _prefix(line, hosts)
    if not body.strip() or (prefix and not mine.startswith(prefix) and prefix.strip("`")):
        return None  # a new record with a prefix of its own (a code span's ` is none; the
        # line's prefix or its outer part, a quote on every line, is none either)
    if not line[len(mine):].strip() and not prefix.strip("`"):
        return False  # a line of prefixes only: its message was wrapped onto the next
    if body[:1].isspace() or _NEW_RECORD.match(body) or _same_start(line, following):
        return None
    return length + 1 + len(body.split(None, 1)[0]) <= width


def _glue(line: str, length: int, following: str, width: int, *, cut: bool,
          hosts: Hosts) -> str | None:
    """How ``following`` joins ``line`` when it is the rest the wrap cut off; None: it is not.

    A terminal cuts at the width, mid-word (glue ""); a page wraps before the word that
    would not fit (glue " "), and cuts a word longer than the width.
    """
    if not following.strip():
        # a terminal cut inside a run of blanks (a progress bar's padding): a whole row of them
        return "" if cut and length == width and len(following) == width else None
    if cut and length == width and _cut_rest(line, following, hosts):
        return ""
    if _word_fits(line, length, following, width, hosts) is not False:
        return None
    return "" if length == width and " " not in line.strip() else " "
