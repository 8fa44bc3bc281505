"""Both line finders (Hyperscan and the pure-Python fallback) give the same lines."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from tests.diagnose.test_corpus import LABELS, verdict

from distrun.diagnose import default_rules, engine, linefind, matcher
from distrun.diagnose.matcher import Matcher, RawHit

LOG = b"".join(
    [
        b"step 1 loss 2.0\n",
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",  # two patterns
        b"x" * 9000 + b" Broken pipe\n",  # longer than the chunk
        b"Connection reset by peer\r\n",  # CRLF
        b"\xff\xfe not utf-8, then NCCL error in: a.cpp:1, unhandled system error\n",
        b"RendezvousTimeoutError\n",
        b"all fine\n" * 500,
        b"ends without a newline: Segmentation fault",
    ]
)
EXPECTED = [
    ("cuda-out-of-memory", 2),
    ("peer-connection-closed", 3),
    ("peer-connection-closed", 4),
    ("nccl-network", 5),
    ("rendezvous-timeout", 6),
    ("unrecognised-error", 507),
]


def scan(fast: bool) -> list[RawHit]:
    return list(Matcher(default_rules(), fast=fast).scan_stream(io.BytesIO(LOG)))


@pytest.mark.parametrize("small", [0, 4 << 20])  # 0: the chunked path even for this log
@pytest.mark.parametrize("chunk", [64, 4096, 1 << 20])  # 64: lines cut at every chunk edge
def test_both_finders_find_the_same_lines(
    chunk: int, small: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matcher, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(matcher, "SMALL_BYTES", small)
    fast, fallback = scan(fast=True), scan(fast=False)
    assert [(h.rule_id, h.line) for h in fast] == EXPECTED
    assert fast == fallback
    assert fast[2].text == "Connection reset by peer"


def test_hyperscan_is_used_where_installed() -> None:
    pytest.importorskip("hyperscan", reason="the fast path needs the hyperscan wheel")
    assert Matcher(default_rules()).finder.name == "hyperscan"
    assert Matcher(default_rules(), fast=False).finder.name == "re"


@pytest.mark.timeout(400)  # the whole corpus twice, once with re alone: 70-150 s on 2 loaded cores
def test_without_the_package_the_corpus_gets_the_same_verdicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = {case: verdict(case) for case in LABELS}
    monkeypatch.setattr(linefind, "_hs", None)
    monkeypatch.setattr(engine, "matcher_for", Matcher)
    assert Matcher(default_rules()).finder.name == "re"
    assert {case: verdict(case) for case in LABELS} == fast


def test_a_pattern_hyperscan_rejects_falls_back_to_re(monkeypatch: pytest.MonkeyPatch) -> None:
    hyperscan = pytest.importorskip("hyperscan", reason="the fast path needs the hyperscan wheel")

    def refuse(self: object, patterns: object) -> None:
        raise hyperscan.CompilerError("unsupported")

    monkeypatch.setattr(linefind.HyperscanFinder, "__init__", refuse)
    assert Matcher(default_rules()).finder.name == "re"


def test_packaged_rules_pass_every_pattern_check() -> None:
    from distrun.diagnose.rules import RULES_FILE, load_rules

    assert load_rules(RULES_FILE.read_text("utf-8")) == default_rules()


def test_compiled_database_is_cached_and_reused(tmp_path: Path) -> None:
    pytest.importorskip("hyperscan", reason="the cache holds Hyperscan databases")
    env = {"DISTRUN_CACHE_DIR": str(tmp_path)}
    patterns = default_rules().all_patterns()
    first = linefind.HyperscanFinder(patterns, env)
    [cached] = tmp_path.glob("diagnose-*.hsdb")
    second = linefind.HyperscanFinder(patterns, env)
    line = b"torch.OutOfMemoryError: CUDA out of memory."
    assert first.matching(line) == second.matching(line) != set()
    cached.write_bytes(b"garbage")  # a broken cache costs a compile, never a wrong answer
    assert linefind.HyperscanFinder(patterns, env).matching(line) == first.matching(line)


def test_an_anchored_pattern_picks_a_prefixed_line_but_matches_only_at_the_start(
        tmp_path: Path) -> None:
    pytest.importorskip("hyperscan", reason="the key finder has no anchors to relax")
    finder = linefind.HyperscanFinder(["^Killed$", "CUDA out of memory"],
                                      {"DISTRUN_CACHE_DIR": str(tmp_path)})
    data = b"step 1\nworker-1: Killed\nKilled\nstep 2\n"
    assert [data[a:b] for a, b in finder.line_spans(data, 0, len(data))] == [
        b"worker-1: Killed", b"Killed"]
    assert finder.matching(b"worker-1: Killed") == set()  # the matcher reads it unprefixed
    assert finder.matching(b"Killed") == {0}


def test_docs_describe_every_rule() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "diagnose.md").read_text("utf-8")
    missing = [r.id for r in default_rules().rule if f"### `{r.id}`" not in docs]
    assert not missing, f"docs/diagnose.md lacks: {missing}"


@pytest.mark.timeout(10)
def test_a_key_matching_nothing_at_all_ends_the_scan() -> None:
    """A key that matches the empty string (load_rules refuses one; this guards the scan
    itself) finds its lines and stops, instead of restarting from the first byte for ever."""
    finder = linefind.KeyFinder(["", "oom"])
    data = b"first\nan oom here\nlast\n"
    assert [data[s:e] for s, e in finder.line_spans(data, 0, len(data))] == [
        b"first", b"an oom here", b"last"]
