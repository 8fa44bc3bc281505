"""The torchrun invocation as a value: nnodes parsed once, its argv, and torch's reading of it."""

from __future__ import annotations

import argparse
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrun.cli.envflags import apply, parse_bool
from distrun.errors import UsageError
from distrun.launch.torchrun import namespace, parser
from distrun.model.invocation import (
    Invocation,
    Nnodes,
    Rendezvous,
    WorkerCommand,
    command_line,
    parse_conf,
)


@pytest.mark.parametrize(("text", "low", "high", "shown"), [
    ("2", 2, 2, "2"), ("1:4", 1, 4, "1:4"), (" 3 ", 3, 3, "3"), (5, 5, 5, "5"), ("2:2", 2, 2, "2"),
])
def test_nnodes_parses_n_and_min_max(text: str | int, low: int, high: int, shown: str) -> None:
    n = Nnodes.parse(text)
    assert (n.min, n.max, str(n), n.elastic) == (low, high, shown, low != high)


@pytest.mark.parametrize("text", ["two", "0", "3:1", "1:x", "", ":2", "-1"])
def test_bad_nnodes_is_one_usage_error_naming_it(text: str) -> None:
    with pytest.raises(UsageError) as err:
        Nnodes.parse(text)
    assert f"--nnodes {text.strip()!r}" in str(err.value) and "fix:" in str(err.value)


def test_rdzv_conf_pairs_and_a_bad_item() -> None:
    assert parse_conf("timeout=900, is_host=1") == (("timeout", "900"), ("is_host", "1"))
    with pytest.raises(UsageError, match="'oops'"):
        parse_conf("timeout=9,oops")


def worker(*args: str) -> WorkerCommand:
    return WorkerCommand("train.py", args)


def test_static_argv_with_local_addr_conf_and_flags() -> None:
    rdzv = Rendezvous("static", "static", master_addr="10.0.0.1", master_port=29511,
                      conf=(("join_timeout", "60"),))
    inv = Invocation(rdzv, Nnodes(2, 2), 4, 1, worker("--name", "run one"), "10.0.0.2",
                     (("--max-restarts", "3"), ("--run-path", None)))
    assert command_line(inv.argv(), [("CUDA_VISIBLE_DEVICES", "0,1")]) == (
        "CUDA_VISIBLE_DEVICES=0,1 torchrun --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 "
        "--master-port 29511 --rdzv-conf join_timeout=60 --local-addr 10.0.0.2 "
        "--nproc-per-node 4 --max-restarts 3 --run-path train.py --name 'run one'")


def test_dynamic_argv_keeps_the_range_and_the_id_and_conf_wins_over_a_fix() -> None:
    rdzv = Rendezvous("dynamic", "c10d", "h:29400", rdzv_id="job7", conf=(("is_host", "0"),))
    inv = Invocation(rdzv.with_conf("is_host", "1"), Nnodes(1, 4), 2, 0,
                     WorkerCommand("pkg.train", (), module=True))
    assert inv.argv()[1:] == ["--nnodes", "1:4", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                              "h:29400", "--rdzv-id", "job7", "--rdzv-conf", "is_host=0",
                              "--nproc-per-node", "2", "-m", "pkg.train"]


def test_standalone_is_what_torchrun_makes_of_it() -> None:
    inv = Invocation(Rendezvous("standalone", endpoint="localhost:0"), Nnodes(1, 1), 2, 0,
                     worker())
    assert inv.argv() == ["torchrun", "--standalone", "--nproc-per-node", "2", "train.py"]
    ns = namespace(inv)
    assert (ns.rdzv_backend, ns.rdzv_endpoint, ns.master_port) == ("c10d", "localhost:0", 29500)
    assert ns.rdzv_id != "none" and ns.nnodes == "1:1"


def test_namespace_ignores_pet_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value not in the argv must not reach torchrun behind the plan's back."""
    monkeypatch.setenv("PET_MAX_RESTARTS", "7")
    inv = Invocation(Rendezvous("static", "static", master_addr="a", master_port=1),
                     Nnodes(2, 2), 1, 0, worker())
    assert namespace(inv).max_restarts == 0


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1,
               max_size=12).filter(lambda s: not s.startswith("-"))
host = st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True)
key = st.from_regex(r"[a-z_]{1,8}", fullmatch=True)
value = st.from_regex(r"[a-zA-Z0-9_.]{1,8}", fullmatch=True)
nnodes = st.builds(lambda lo, extra: Nnodes(lo, lo + extra), st.integers(1, 64),
                   st.integers(0, 64))
rendezvous = st.one_of(
    st.builds(lambda a, p, i, c: Rendezvous("static", "static", master_addr=a, master_port=p,
                                            rdzv_id=i, conf=c),
              host, st.integers(1, 65535), value, st.lists(st.tuples(key, value), max_size=3)
              .map(tuple)),
    st.builds(lambda h, p, i, c: Rendezvous("dynamic", "c10d", f"{h}:{p}", rdzv_id=i, conf=c),
              host, st.integers(1, 65535), value, st.lists(st.tuples(key, value), max_size=3)
              .map(tuple)),
)
flags = st.lists(st.sampled_from([("--max-restarts", "3"), ("--monitor-interval", "0.5"),
                                  ("--start-method", "fork"), ("--role", "trainer"),
                                  ("--log-dir", "/tmp/a b")]), unique=True, max_size=3)
workers = st.builds(WorkerCommand, text, st.lists(text, max_size=4).map(tuple), st.booleans(),
                    st.booleans())
invocations = st.builds(Invocation, rendezvous, nnodes, st.integers(1, 16), st.integers(0, 63),
                        workers, st.one_of(st.none(), host), flags.map(tuple))


TORCHRUN = parser()


@settings(max_examples=150, deadline=None)
@given(invocations)
def test_argv_parsed_by_torchrun_gives_the_invocation_back(inv: Invocation) -> None:
    """Every field of the value survives torch's own parser, also through the shell line."""
    ns: argparse.Namespace = TORCHRUN.parse_args(shlex.split(command_line(inv.argv()))[1:])
    r = inv.rendezvous
    assert ns.nnodes == str(inv.nnodes) and ns.nproc_per_node == str(inv.nproc)
    assert ns.rdzv_id == r.rdzv_id and ns.local_addr == inv.local_addr
    assert (ns.rdzv_conf or "") == r.conf_text()
    if r.kind == "static":
        assert (ns.rdzv_backend, ns.node_rank) == ("static", inv.node_rank)
        assert (ns.master_addr, ns.master_port) == (r.master_addr, r.master_port)
    else:
        assert (ns.rdzv_backend, ns.rdzv_endpoint) == (r.backend, r.endpoint)
    assert (ns.module, ns.no_python) == (inv.worker.module, inv.worker.no_python)
    assert [ns.training_script, *ns.training_script_args] == [inv.worker.target, *inv.worker.args]
    given_flags = dict(inv.flags)
    if "--max-restarts" in given_flags:
        assert ns.max_restarts == 3
    if "--log-dir" in given_flags:
        assert ns.log_dir == "/tmp/a b"


@pytest.mark.parametrize(("raw", "want"), [("1", True), ("yes", True), ("TRUE", True),
                                           ("on", True), ("0", False), ("no", False),
                                           ("false", False), ("", False)])
def test_on_off_variables_accept_the_usual_words(raw: str, want: bool) -> None:
    assert parse_bool("DISTRUN_FORCE", raw) is want


def test_distrun_variables_are_type_checked() -> None:
    p = argparse.ArgumentParser()
    actions = [p.add_argument("--force", action="store_true"),
               p.add_argument("--master-wait", type=float, default=300.0),
               p.add_argument("--stall-action", choices=("stop", "warn"), default="stop")]
    apply(actions, {"DISTRUN_FORCE": "yes", "DISTRUN_MASTER_WAIT": "5"})
    assert p.parse_args([]).force is True and p.parse_args([]).master_wait == 5.0
    for var, raw in (("DISTRUN_FORCE", "maybe"), ("DISTRUN_MASTER_WAIT", "soon"),
                     ("DISTRUN_STALL_ACTION", "panic")):
        with pytest.raises(UsageError) as err:
            apply(actions, {var: raw})
        assert f"{var}={raw!r}" in str(err.value) and "fix:" in str(err.value)
