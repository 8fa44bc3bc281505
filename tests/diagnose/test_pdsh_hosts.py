"""Multi-node logs whose every line carries its node (pdsh under `deepspeed --hostfile`), and
the rank a consequence says it waited for (helper r, session 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrun.diagnose import diagnose, to_json
from distrun.diagnose.normalize import pdsh_hosts

# pdsh starts every line a node printed with "host: "; torch < 2.2 adds no rank prefix.
IMPORT = [
    "gpu003: [2024-02-11 22:36:19,106] [INFO] [launch.py:146:main] WORLD INFO DICT: {}",
    "gpu003: Traceback (most recent call last):",
    'gpu003:   File "train.py", line 3, in <module>',
    "gpu003:     import apex",
    "gpu003: ImportError: No module named apex",
]
STORE_WAIT = (
    "RuntimeError: [14] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
    "via c10d key-value store by key '0', but store->get('0') got error: Connection reset by "
    "peer. This may indicate a possible application crash on rank 0 or a network set up issue.")


def _root(tmp_path: Path, lines: list[str]) -> dict[str, object]:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = to_json(diagnose([log]))
    causes = found["causes"]
    assert isinstance(causes, list) and causes, found
    root: dict[str, object] = causes[0]
    return root


def test_a_traceback_every_line_of_which_names_its_node_is_read(tmp_path: Path) -> None:
    # the old reading took the host-prefixed lines for one wrapped line and never saw the
    # ImportError at a line's start: no known cause
    root = _root(tmp_path, IMPORT)
    assert (root["id"], root["node"]) == ("python-module-missing", "gpu003")
    assert root["evidence"] == [{"file": str(tmp_path / "job.log"), "line": 5,
                                 "text": "ImportError: No module named apex"}]


def test_a_node_killed_under_pdsh_is_found_on_that_node(tmp_path: Path) -> None:
    # old: "nothing failed" ("worker-1: Killed" is no bare "Killed")
    lines = ["worker-1: epoch 0 step 120 loss 2.3121", "worker-0: epoch 0 step 120 loss 2.3187",
             "worker-1: epoch 0 step 130 loss 2.2987", "worker-0: epoch 0 step 130 loss 2.2990",
             "worker-1: Killed"]
    root = _root(tmp_path, lines)
    assert (root["id"], root["node"]) == ("host-oom-or-killed", "worker-1")


def test_pdsh_hosts_are_found_in_a_big_log_too(tmp_path: Path) -> None:
    # over SMALL_BYTES the hosts come from the log's first chunk
    filler = "worker-1: epoch 0 step 100 loss 2.3121 lr 0.0001 tokens/s 81234 " * 2
    lines = [filler] * (5 * 1024 * 1024 // len(filler)) + [
        "worker-1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    root = _root(tmp_path, lines)
    assert (root["id"], root["node"]) == ("cuda-out-of-memory", "worker-1")


@pytest.mark.parametrize("prefix", ["worker-1: ", "[rank1]: ", "[default1]:", "1: "])
def test_a_wording_anchored_at_a_line_start_is_found_behind_a_prefix_in_a_big_log(
        tmp_path: Path, prefix: str) -> None:
    """Over SMALL_BYTES the line finder sees raw lines: a pattern anchored at a line's start
    (``^Killed$``, a shell's report of a SIGKILL) must still pick the prefixed line for the
    matcher, which reads it without its prefix (the old finder skipped it: no known cause)."""
    filler = f"{prefix}epoch 0 step 100 loss 2.3121 lr 0.0001 tokens/s 81234 " * 2
    lines = [filler] * (5 * 1024 * 1024 // len(filler)) + [f"{prefix}Killed"]
    root = _root(tmp_path, lines)
    assert (root["id"], root["evidence"]) == ("host-oom-or-killed", [{
        "file": str(tmp_path / "job.log"), "line": len(lines), "text": "Killed"}])


def test_repeated_words_that_are_no_host_names_are_kept() -> None:
    text = "\n".join(["RuntimeError: a", "RuntimeError: b", "RuntimeError: c",
                      "Epoch: 1", "Epoch: 2", "Epoch: 3", "gpu7: x", "gpu7: y",
                      "ncclSystemError: a", "ncclSystemError: b", "ncclSystemError: c"])
    assert pdsh_hosts(text) == frozenset()
    assert pdsh_hosts(text + "\ngpu7: z") == frozenset({"gpu7"})


def test_a_store_wait_names_the_rank_it_waited_for_not_its_own_node(tmp_path: Path) -> None:
    # rank 14 on gpu004 waited for rank 0's NCCL id; the old verdict put rank 0 on gpu004
    lines = [f"gpu004: [rank14]: {STORE_WAIT}", f"gpu004: [rank15]: {STORE_WAIT}"]
    root = _root(tmp_path, lines)
    assert (root["id"], root["rank"], root["node"]) == ("collective-timeout", 0, None)
    assert "look in the log of rank 0" in str(root["note"])


def test_a_store_wait_alone_names_rank_0_from_its_own_words(tmp_path: Path) -> None:
    # without a prefix the line's own rank is the first it names ("[14]"), not rank 0
    root = _root(tmp_path, [STORE_WAIT.replace("[14]", "[3]")])
    assert (root["id"], root["rank"]) == ("collective-timeout", 0)
    assert "look in the log of rank 0" in str(root["note"])
