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

import hashlib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from distrun.diagnose import cache as disk_cache

GENERIC_ERROR_ID = "unrecognised-error"
RANK_CONTEXT_ID = "rank-context"

# Lines that look like an error but match no rule: the "no known cause" evidence.
# A command-line parser's usage error is one too: argparse's "prog: error: <message>"
# (Lib/argparse.py: "unrecognized arguments: ", "the following arguments are required: ",
# "argument --x: invalid int value", "ambiguous option: "), absl's "FATAL Flags parsing
# error: Unknown command line flag". torch >= 2.0's launcher passes --local-rank, which a
# script's own parser may refuse; the launcher's summary after it is only its consequence.
GENERIC_ERROR_PATTERNS = (
    "Error: ", "Exception: ", "Segmentation fault",
    ": error: (unrecognized arguments|the following arguments are required|argument "
    "|ambiguous option|one of the arguments)",
    "Flags parsing error: ",
)
# Signs that something failed, too common or too vague to stand beside a cause (a traceback's
# header comes before every exception, a weak cause after it would be dropped): used only
# when nothing else was found, so that a log that failed is never reported as "nothing
# failed". They name no cause and change no verdict: they are the earliest error lines.
FAILURE_SIGN_ID = "failure-sign"
FAILURE_SIGN_PATTERNS = (
    "Traceback \\(most recent call last\\)",  # CPython, also when its last line was cut
    # c10 logging at error level: "[E socket.cpp:860] ..." (torch < 2.3), "[E1124
    # 09:45:01.410000000 ProcessGroupNCCL.cpp:1484] ..." (torch >= 2.3)
    "\\[E[0-9 :.]*[A-Za-z0-9_]+\\.cpp:[0-9]+\\]",
    "Fatal Python error",
    "\\(core dumped\\)",
    # logging's level names ("ERROR:root:", "[ERROR]", "| ERROR |"), not a variable's name
    "^ERROR[]:| ]",
    "[^A-Za-z_]ERROR[]:| ]",
    "^FATAL[]:| ]",
    "[^A-Za-z_]FATAL[]:| ]",
    "CUDA_ERROR_[A-Z_]+",  # the CUDA driver API's error names (jax, cupy, numba print them)
    "exit(ed with)? (status|code):? -?[1-9]",
)
# Informational lines that carry an error-like wording but never a cause; they are
# matched first and dropped, so that the wording does not name a cause by accident.
BENIGN_ID = "benign-line"
BENIGN_PATTERNS = (
    # NCCL src/plugin: probing the optional net/tuner/profiler plugins, e.g. "NCCL INFO
    # NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open
    # shared object file" when none is installed (the internal transport is used)
    "NCCL INFO (NET|TUNER|PROFILER|ENV)/Plugin",
    "No plugin found \\(libnccl-",
    # NCCL/RCCL misc/ibvwrap.cc probing libibverbs on a host without InfiniBand: "NCCL WARN
    # Failed to open libibverbs.so[.1]", then "NET/Socket : Using ..." (the socket transport)
    "ibvwrap\\.cc:[0-9]+ NCCL WARN Failed to open libibverbs",
    # rdma-core libibverbs (dynamic_driver.c) probing every provider it knows at start-up:
    # "libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so': libmlx5-rdmav34.so:
    # cannot open shared object file"; the providers present still work
    "ibverbs: [Ww]arning: couldn't load driver",
    # TensorFlow's dso_loader probing the CUDA libraries at import (transformers imports it
    # in torch jobs too); TF says "Ignore above cudart dlerror if you do not have a GPU set
    # up on your machine" / "Skipping registering GPU devices..." and goes on on the CPU.
    # Its wording (dso_loader.cc: "Could not load dynamic library '<name>'; dlerror: ...")
    # is a probe with or without that prefix (a paste often drops it): a torch job's failure
    # is elsewhere, and a TensorFlow job goes on without the GPU
    "dso_loader\\.cc:[0-9]+\\] Could not load dynamic library",
    "Could not load dynamic library '[^']+'; dlerror: ",
    # torch c10d socket.cpp warning while it tries IPv6 and IPv4 for a local store (torch
    # 2.0-2.2): "[W socket.cpp:601] [c10d] The client socket has failed to connect to
    # [localhost]:29500 (errno: 99 - Cannot assign requested address)." It goes on with
    # the next address; a real failure ends in "The client socket has timed out after".
    "\\[c10d\\] The (client|server) socket .*\\[(localhost|::|::1|127\\.0\\.0\\.1)\\]:[0-9]+ "
    "\\(errno: (97|99) - ",
    # torch ProcessGroupWrapper.cpp under TORCH_DISTRIBUTED_DEBUG=DETAIL logs every
    # collective it checks, in healthy runs too: "[Rank 0] Running collective:
    # CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, ...)". A mismatch is its
    # error "Detected mismatch between collectives on ranks. Rank 0 is running collective:
    # CollectiveFingerPrint(...)" (tests/diagnose/healthy/torchrun-collectives-detail.log)
    "\\[Rank [0-9]+\\] Running collective: CollectiveFingerPrint\\(",
    # the title row of `npu-smi info`'s device table ("| npu-smi 24.1.rc1.b030   Version:
    # 24.1.rc1.b030 |"): tool output pasted with a log, not an HCCL failure
    # (tests/fixtures/tools/ascend/npu-smi-info-*.txt)
    "\\| npu-smi [0-9][0-9a-z.]* +Version: ",
    # torch/distributed/launch.py's FutureWarning, printed on every run of the deprecated
    # launcher (torch 1.10+): "If your script expects `--local-rank` argument to be set,
    # please\nchange it to read from `os.environ['LOCAL_RANK']` instead." Advice, not a
    # script that reads LOCAL_RANK without a launcher (tests/diagnose/healthy/)
    "change it to read from .os\\.environ\\[.LOCAL_RANK.\\]. instead",
    # torch 2.3.0's cuDNN v8 API warning when a conv plan is not supported and another is
    # tried (aten/src/ATen/native/cudnn/Conv_v8.cpp): "UserWarning: Plan failed with a
    # cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed
    # cudnn_status: CUDNN_STATUS_NOT_SUPPORTED"; training goes on (pytorch/pytorch#121834,
    # silenced in 2.3.1). Not "CuDNNError: ... EXECUTION_FAILED", which is a real failure.
    "Plan failed with a cudnnException: .*CUDNN_STATUS_NOT_SUPPORTED",
    # torchvision/io/image.py's import-time warning when its optional image codecs library
    # does not load ("UserWarning: Failed to load image Python extension: '.../image.so:
    # undefined symbol: _ZN3c10...'If you don't plan on using image functionality from
    # `torchvision.io`, you can ignore this warning."); training goes on. A torchvision built
    # for another torch fails for real on its ops: "operator torchvision::nms does not exist".
    "Failed to load image Python extension",
    # Ray's raylet when a worker's connection drops (node_manager.cc
    # HandleClientConnectionError): "Worker unexpectedly exits with a connection error code 2.
    # End of file. There are some potential root causes. (1) The process is killed by SIGKILL
    # by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is
    # crashed unexpectedly due to SIGSEGV ...". A list of guesses printed for every lost
    # worker, not a sign of memory; Ray's RayActorError line names the lost worker, and a
    # real kill is the raylet's "killed due to memory pressure (OOM)" or the kernel's.
    "There are some potential root causes\\. \\(1\\) The process is killed by SIGKILL by OOM",
)
# NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=COLL logs every collective a process issues
# (src/enqueue.cc: "<Op>: opCount <n> sendbuff ... count <c> datatype <d> op <o> root <r>
# comm ... [nranks=<n>]"): never a cause itself; compared across processes, it shows
# ranks that issued different collectives (consequence.dump_mismatch_hits).
COLLECTIVE_DUMP_ID = "collective-dump"
COLLECTIVE_DUMP_PATTERNS = ("NCCL INFO [A-Za-z]+: opCount [0-9a-f]+ ",)
# torchelastic's failure summary names the rank on its own line before the cause.
RANK_CONTEXT_PATTERNS = (
    "rank *: [0-9]+ \\(local_rank",  # torch < 1.10 wrote "rank: 3 (local_rank: 3)"
    "Process [0-9]+ terminated with the following error",  # torch.multiprocessing.spawn
    # torch_npu's error header ("[ERROR] <time> (PID:15597, Device:2, RankID:2) ERR00100 PTA
    # call acl api failed"), over the CANN message lines it introduces (EL0004: ...)
    "\\(PID:[0-9]+, Device:[0-9]+, RankID:[0-9]+\\)",
)

_FORBIDDEN = ("(?", "\\d", "\\s", "\\w", "\\b", "*?", "+?", "??")
_MIN_KEY = 4  # bytes (UTF-8): the line finders scan bytes, and 3 CJK characters are 9 of them
_MAX_KEY = 12
_KINDS = ("primary", "secondary")
_FIELDS = {"id", "title", "category", "kind", "patterns", "weak", "context", "refines",
           "max_confidence", "explanation", "fix", "docs", "tail", "past_tail", "repeated"}
CONFIDENCES = ("high", "medium", "low")
CONTEXT_PREFIX = "context:"
TAIL_PREFIX = "tail:"
PAST_TAIL_PREFIX = "past-tail:"
REPEATED_PREFIX = "repeated:"
# rule ids of hints (a rule's context, tail, past-tail or repeated wording): never an error line
HINT_PREFIXES = (CONTEXT_PREFIX, TAIL_PREFIX, PAST_TAIL_PREFIX, REPEATED_PREFIX)


class RuleError(ValueError):
    """The rule file is malformed (the message names the rule and the field)."""


@dataclass(frozen=True)
class Rule:
    """One signature -> cause rule, as written in ``rules.toml``.

    ``patterns`` are strong signatures (a match alone is good evidence);
    ``max_confidence`` caps the confidence of a rule whose error is often the
    symptom of a cause elsewhere (a device-visibility error caused by the
    scheduler's binding or a framework's device code);
    ``weak`` ones are wordings that also appear in other failures, so a cause
    found only through them is reported with low confidence. ``context``
    patterns (traceback frames) never name a cause alone: they turn a nearby
    cause of a rule in ``refines`` into this rule (a CUDA-unavailable error
    raised inside MMEngine's init_dist is the framework's CUDA-only init).
    ``tail`` patterns (what a hung job prints last) name this rule, at low
    confidence, only for a file with no error line at all whose last lines they
    match, unless one of its ``past_tail`` patterns (the run went on: a summary
    printed at its end) comes after them; ``repeated`` patterns (a line each
    process prints once, with its rank) name it, derived, when one file holds the
    same line twice from two processes and nothing else names a cause.
    """

    id: str
    title: str
    category: str
    kind: str
    patterns: tuple[str, ...]
    explanation: str
    fix: tuple[str, ...]
    docs: tuple[str, ...]
    weak: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    refines: tuple[str, ...] = ()
    max_confidence: str = "high"
    tail: tuple[str, ...] = ()
    past_tail: tuple[str, ...] = ()
    repeated: tuple[str, ...] = ()

    @classmethod
    def from_table(cls, table: dict[str, Any], check: bool = True) -> Rule:
        name = str(table.get("id", "?"))
        unknown = set(table) - _FIELDS
        if unknown:
            raise RuleError(f"rule {name}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            rule = cls(
                id=_text(table, "id"), title=_text(table, "title"),
                category=_text(table, "category"), kind=_text(table, "kind"),
                patterns=_texts(table, "patterns"), explanation=_text(table, "explanation"),
                fix=_texts(table, "fix"), docs=_texts(table, "docs"),
                weak=_texts(table, "weak", required=False),
                context=_texts(table, "context", required=False),
                refines=_texts(table, "refines", required=False),
                max_confidence=str(table.get("max_confidence", "high")),
                tail=_texts(table, "tail", required=False),
                past_tail=_texts(table, "past_tail", required=False),
                repeated=_texts(table, "repeated", required=False),
            )
        except (KeyError, TypeError) as err:
            raise RuleError(f"rule {name}: {err}") from err
        if check:
            rule.validate()
        elif rule.kind not in _KINDS:
            raise RuleError(f"rule {rule.id}: kind {rule.kind!r} is not one of {_KINDS}")
        return rule

    def validate(self) -> None:
        if not re.fullmatch(r"[a-z0-9-]+", self.id):
            raise RuleError(f"rule id {self.id!r} is not lower-case letters, digits and dashes")
        if self.kind not in _KINDS:
            raise RuleError(f"rule {self.id}: kind {self.kind!r} is not one of {_KINDS}")
        if self.max_confidence not in CONFIDENCES:
            raise RuleError(f"rule {self.id}: max_confidence {self.max_confidence!r} is not one of "
                            f"{CONFIDENCES}")
        if bool(self.context) != bool(self.refines):
            raise RuleError(f"rule {self.id}: context and refines go together")
        for pattern in (self.patterns + self.weak + self.context + self.tail
                        + self.past_tail + self.repeated):
            try:
                check_pattern(pattern)
            except ValueError as err:
                raise RuleError(f"rule {self.id}: {err}") from err
        for link in self.docs:
            if not link.startswith("https://"):
                raise RuleError(f"rule {self.id}: doc link {link!r} is not an https URL")


def _text(table: dict[str, Any], key: str) -> str:
    value = table[key]
    if not isinstance(value, str) or not value:
        raise TypeError(f"{key} must be a non-empty string")
    return value


def _texts(table: dict[str, Any], key: str, required: bool = True) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{key} must be a list of strings")
    if required and not value:
        raise TypeError(f"{key} must not be empty")
    return tuple(value)


@dataclass(frozen=True)
class RuleSet:
    """All rules, in file order (the first matching rule wins a line)."""

    rule: tuple[Rule, ...]

    def __post_init__(self) -> None:
        if not self.rule:
            raise RuleError("a rule set needs at least one rule")
        ids = [r.id for r in self.rule]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise RuleError(f"duplicate rule ids: {', '.join(dupes)}")
        unknown = {x for r in self.rule for x in r.refines} - set(ids)
        if unknown:
            raise RuleError(f"refines names unknown rule(s): {', '.join(sorted(unknown))}")
        object.__setattr__(self, "_by_id", {r.id: r for r in self.rule})

    @classmethod
    def from_toml(cls, data: dict[str, Any], check: bool = True) -> RuleSet:
        """``check=False`` skips the per-pattern checks (the packaged file, checked in CI)."""
        tables = data.get("rule")
        if not isinstance(tables, list):
            raise RuleError("the rule file has no [[rule]] tables")
        return cls(tuple(Rule.from_table(t, check) for t in tables))

    def ids(self) -> dict[str, Rule]:
        """Rule id -> rule."""
        found: dict[str, Rule] = self.__dict__["_by_id"]
        return found

    def by_id(self, rule_id: str) -> Rule:
        found: dict[str, Rule] = self.__dict__["_by_id"]
        return found[rule_id]

    def all_patterns(self) -> list[str]:
        """Every pattern the engine matches (the grep -f list)."""
        own = [p for r in self.rule for p in r.patterns + r.weak + r.context + r.tail + r.past_tail
               + r.repeated]
        return own + list(GENERIC_ERROR_PATTERNS) + list(RANK_CONTEXT_PATTERNS) + list(
            BENIGN_PATTERNS) + list(COLLECTIVE_DUMP_PATTERNS) + list(FAILURE_SIGN_PATTERNS)


def check_pattern(pattern: str) -> None:
    """Raise ValueError unless ``pattern`` is portable and has a literal key."""
    for bad in _FORBIDDEN:
        if bad in pattern:
            raise ValueError(f"pattern {pattern!r} uses {bad!r}, which grep -E reads differently")
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"pattern {pattern!r} does not compile: {err}") from err
    if _alternation_at_top(pattern):
        raise ValueError(f"pattern {pattern!r} is an alternation at its top level (a|b): no "
                         "literal is in every match; write each alternative as its own pattern")
    if not pattern_key(pattern):
        raise ValueError(
            f"pattern {pattern!r} has no literal run of {_MIN_KEY}+ bytes outside groups"
            " (the engine finds candidate lines by such a literal; without one it tries every"
            " line of every log)"
        )


def _alternation_at_top(pattern: str) -> bool:
    """``pattern`` has a ``|`` outside every group: its literal runs are not all in a match."""
    depth, i = 0, 0
    while i < len(pattern):
        step, _ = _token(pattern, i)
        char = pattern[i]
        depth += (char == "(") - (char == ")")
        if char == "|" and depth == 0:
            return True
        i += step
    return False


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
        for start in range(len(run)):
            score = _commonness(run[start])
            if score < best_score and len(run[start : start + _MAX_KEY].encode()) >= _MIN_KEY:
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


def _parse_toml(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    data: dict[str, Any] = tomllib.loads(text)
    return data


def load_rules(text: str | None = None) -> RuleSet:
    """Parse and validate a rule set; the packaged ``rules.toml`` by default."""
    if text is None:
        return default_rules()
    return RuleSet.from_toml(_parse_toml(text))


RULES_FILE = Path(__file__).parent / "rules.toml"


@cache
def default_rules() -> RuleSet:
    """The packaged rules; their patterns are checked in full when the file is first read
    (a pattern without a literal key is refused there, naming the rule and the pattern),
    not at every start.

    The parsed file is cached as JSON (parsing TOML is most of diagnose's start-up), and
    only once it passed the checks: the cache's name is the file's hash, so every change to
    the file is checked once.
    """
    raw = RULES_FILE.read_bytes()
    path = disk_cache.cache_file(f"rules-{hashlib.sha256(raw).hexdigest()[:24]}.json")
    cached = disk_cache.read(path)
    data: Any = None
    if cached is not None:
        try:
            data = json.loads(cached)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        data = _parse_toml(raw.decode("utf-8"))
        checked = RuleSet.from_toml(data)  # raises RuleError before anything is cached
        disk_cache.store(path, json.dumps(data).encode())
        return checked
    return RuleSet.from_toml(data, check=False)
