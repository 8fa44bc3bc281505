"""Engine readings added in session 9 (issue 12): several hints on one line, srun's task
ranges, the last tail line as a hang's witness, patterns without a prefilter key."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose
from distrun.diagnose.matcher import Matcher
from distrun.diagnose.rules import RuleSet, load_rules


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
