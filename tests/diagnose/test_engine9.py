"""Engine readings added in session 9 (issue 12): several hints on one line, srun's task
ranges, the last tail line as a hang's witness, patterns without a prefilter key."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from distrun.diagnose import diagnose
from distrun.diagnose import rules as rules_module
from distrun.diagnose.matcher import Matcher
from distrun.diagnose.rules import (
    RuleError,
    RuleSet,
    check_pattern,
    default_rules,
    load_rules,
    pattern_key,
)


def _rule(rule_id: str, extra: str) -> str:
    return (f'[[rule]]\nid = "{rule_id}"\ntitle = "t"\ncategory = "network"\nkind = "primary"\n'
            f'patterns = ["never printed by anything {rule_id}"]\n{extra}\nexplanation = "e"\n'
            'fix = ["f"]\ndocs = ["https://example.org/"]\n')


# Two rules that read NCCL_DEBUG=INFO start-up lines: one waits in the bootstrap (its tail:
# the bootstrap interface line; a channel connected afterwards means the bootstrap is done),
# one in the first peer-to-peer transfer (its tail: the P2P channel line).
HINT_RULES = load_rules(
    _rule("bootstrap-hang", 'tail = ["NCCL INFO Bootstrap : Using"]\n'
                            'past_tail = ["NCCL INFO Channel [0-9/]+ : "]')
    + _rule("p2p-hang", 'tail = ["via P2P/IPC"]'))
# NCCL 2.12+ INFO lines as NCCL prints them (src/bootstrap.cc "Bootstrap : Using",
# src/transport/p2p.cc "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"), host:pid:tid [dev] header.
NCCL_INIT = [
    "gpu-a:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:10.2.3.32<0>",
    "NCCL version 2.18.3+cuda12.2",
    "gpu-a:4101:4188 [0] NCCL INFO Setting affinity for GPU 0 to ff00ff",
    "gpu-a:4101:4188 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
]


def _write(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log


@pytest.mark.parametrize("fast", [True, False])  # Hyperscan, and the pure-Python finder
def test_a_line_that_is_a_hint_of_two_rules_counts_for_both(fast: bool) -> None:
    found = [h.rule_id for h in Matcher(HINT_RULES, fast).scan_lines(NCCL_INIT[3:])]
    assert found == ["tail:p2p-hang", "past-tail:bootstrap-hang"]


def test_a_channel_line_ends_the_bootstrap_wait_and_is_the_p2p_hang(tmp_path: Path) -> None:
    # the old reading kept only the channel line's first hint (p2p's tail), so the bootstrap
    # wait it ends was taken as the (earliest) hang
    root = diagnose([_write(tmp_path, NCCL_INIT)], HINT_RULES).causes[0]
    assert (root.rule.id, root.confidence) == ("p2p-hang", "low")


def test_several_hints_on_a_line_in_a_big_log_too(tmp_path: Path) -> None:
    # big logs are read by chunks, line by line (not the small-paste reader)
    filler = [f"step {i} | loss 0.{i:04d}" for i in range(400_000)]
    root = diagnose([_write(tmp_path, filler + NCCL_INIT)], HINT_RULES).causes[0]
    assert root.rule.id == "p2p-hang"


def test_an_error_line_gives_no_extra_hints() -> None:
    rules: RuleSet = load_rules(_rule("oom", 'weak = ["out of memory"]')
                                + _rule("other", 'past_tail = ["CUDA out of memory"]'))
    found = [h.rule_id for h in Matcher(rules).scan_lines(["torch.OutOfMemoryError: CUDA out of memory."])]
    assert found == ["oom"]


# Two waits, each the tail of its own rule and with nothing that ends it: a job that hangs in
# its first peer-to-peer transfer printed the bootstrap line on its way there.
TAIL_RULES = load_rules(_rule("bootstrap-hang", 'tail = ["NCCL INFO Bootstrap : Using"]')
                        + _rule("p2p-hang", 'tail = ["via P2P/IPC"]'))


def test_a_hang_is_the_last_wait_the_log_shows(tmp_path: Path) -> None:
    root = diagnose([_write(tmp_path, NCCL_INIT)], TAIL_RULES).causes[0]
    assert root.rule.id == "p2p-hang"
    assert root.evidence[0].text.endswith("via P2P/IPC")


def test_the_witness_of_a_hang_is_the_last_line_it_printed(tmp_path: Path) -> None:
    # nccl-tests (src/common.cu) header, then NCCL 2.7-2.11 INFO channel lines
    # (src/transport/p2p.cc "Channel 00 : 0[1000] -> 1[2000] via P2P/IPC"); the run stops there
    lines = ["# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5",
             "# Using devices",
             "#   Rank  0 Pid  15833 on gpu-a device  0 [0x1a] Tesla V100-SXM2-32GB",
             "#   Rank  1 Pid  15833 on gpu-a device  1 [0x1b] Tesla V100-SXM2-32GB",
             "gpu-a:15833:15833 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1b000] via P2P/IPC",
             "gpu-a:15833:15833 [1] NCCL INFO Channel 00 : 1[1b000] -> 0[1a000] via P2P/IPC"]
    root = diagnose([_write(tmp_path, lines)]).causes[0]
    assert (root.rule.id, root.confidence) == ("gpu-p2p-broken", "low")
    assert root.evidence[0].text.startswith("gpu-a:15833:15833 [1] NCCL INFO Channel 00 : 1[")


def test_every_pattern_the_engine_matches_has_a_prefilter_key() -> None:
    # the rules' own and the engine's (generic error, benign, rank context, NCCL dumps)
    for pattern in default_rules().all_patterns():
        check_pattern(pattern)
        assert pattern_key(pattern), pattern


@pytest.fixture
def packaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for the packaged rules.toml, with its own cache folder."""
    monkeypatch.setenv("DISTRUN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rules_module, "RULES_FILE", tmp_path / "rules.toml")
    default_rules.cache_clear()
    yield tmp_path / "rules.toml"
    default_rules.cache_clear()


@pytest.mark.parametrize("pattern", ["[0-9]+ (GB|MB)", "(SIGBUS|Bus error)", "srun|NCCL WARN Call to"])
def test_a_packaged_pattern_without_a_key_is_refused_when_the_file_is_read(
        packaged: Path, pattern: str) -> None:
    packaged.write_text(_rule("keyless", f'weak = ["{pattern}"]'), encoding="utf-8")
    with pytest.raises(RuleError) as refused:
        default_rules()
    assert "rule keyless" in str(refused.value) and repr(pattern) in str(refused.value)
    assert not list((packaged.parent / "cache").glob("rules-*.json"))  # nothing cached


def test_packaged_rules_are_checked_once_then_read_from_the_cache(packaged: Path) -> None:
    packaged.write_text(_rule("fine", 'weak = ["NCCL WARN Call to connect"]'), encoding="utf-8")
    assert [r.id for r in default_rules().rule] == ["fine"]
    assert len(list((packaged.parent / "cache").glob("rules-*.json"))) == 1
    default_rules.cache_clear()
    assert [r.id for r in default_rules().rule] == ["fine"]


# srun --label output ("5: ..." names the task) of a job whose ranks 4-7 on one node ran out
# of memory together, then srun's report of that node's tasks (Slurm src/srun launch
# _task_finish: "%s: %s %s: Exited with exit code %d", the task list as ranges).
SRUN_OOM = [
    "5: Traceback (most recent call last):",
    '5:   File "train.py", line 88, in <module>',
    "5: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a "
    "total capacity of 79.15 GiB of which 1.02 GiB is free.",
    "srun: error: node12: tasks 4-7: Exited with exit code 1",
    "srun: error: node11: tasks 0-3: Killed",
]


def test_a_cause_on_a_rank_srun_reports_in_the_first_failing_range_is_not_in_doubt(
        tmp_path: Path) -> None:
    # the old reading took srun's "tasks 4-7" as rank 4 alone, so the OOM on rank 5 was
    # "another rank than the first failure" and dropped to medium
    root = diagnose([_write(tmp_path, SRUN_OOM)]).causes[0]
    assert (root.rule.id, root.confidence, root.rank) == ("cuda-out-of-memory", "high", 5)


def test_a_cause_outside_the_first_failing_range_stays_in_doubt(tmp_path: Path) -> None:
    lines = [line.replace("5: ", "1: ", 1) for line in SRUN_OOM[:3]] + SRUN_OOM[3:]
    root = diagnose([_write(tmp_path, lines)]).causes[0]
    assert (root.rule.id, root.confidence, root.rank) == ("cuda-out-of-memory", "medium", 1)


@pytest.mark.parametrize(("report", "rank"), [
    ("srun: error: gpu-03: tasks 8-13,15: Exited with exit code 1", 8),
    ("srun: error: gpu-03: tasks 0,2-3: Exited with exit code 1", 0),
    ("srun: error: gpu-[03-04]: tasks 4-11: Exited with exit code 1", 4),
    ("srun: error: gpu-03: task 14: Exited with exit code 1", 14),
])
def test_srun_task_lists_name_their_first_task(tmp_path: Path, report: str, rank: int) -> None:
    # only srun's reports: the verdict is the launcher's summary, on the first failing task
    root = diagnose([_write(tmp_path, [report])]).causes[0]
    assert (root.rule.id, root.rank) == ("elastic-summary-no-root-cause", rank)


@pytest.mark.parametrize("fast", [True, False])
def test_a_short_cjk_literal_is_a_key_the_finders_scan_for(fast: bool) -> None:
    # glibc's Korean catalogue (Debian libc.mo, ko): strsignal(SIGKILL) "Killed" is "죽었음",
    # three characters but nine bytes, as bash prints a killed job in a ko_KR locale
    rules = load_rules(_rule("killed", 'weak = ["[0-9] +죽었음"]'))
    assert pattern_key("[0-9] +죽었음") == "죽었음"
    found = list(Matcher(rules, fast).scan_stream(io.BytesIO(
        "step 10 loss 2.31\n./run.sh: line 12:  4242 죽었음               python train.py\n"
        .encode())))
    assert [(h.rule_id, h.line) for h in found] == [("killed", 2)]
