"""The node exchange under hostile peers: real loopback sockets, a real master in a thread.

Malformed values in every field, a slow-loris client, a wrong or missing job token, nodes that
plan different sizes: the master never raises anything but its one-line NodesMissing, answers
each bad peer with one line, keeps serving the good ones, and keeps to its deadline.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from distrun.checks.network import NetworkSetup, probe_master
from distrun.checks.nodesync import NodeFacts, NodesMissing, bind_address, join, serve
from distrun.checks.nodewire import (
    PEER_LINE_MAX,
    PROTOCOL,
    Answer,
    Hello,
    JobKey,
    Refused,
    decode,
    encode,
    job_key,
)
from distrun.model.plan import Finding

pytestmark = pytest.mark.timeout(120)

FACTS = NodeFacts(host="n0", node_rank=0, python="3.11.7", python_minor="3.11",
                  torch="2.13.0", distrun="0.1.0", git="abc", nproc_per_node=2, nnodes=2,
                  world_size=4)
GOOD_HELLO: dict[str, Any] = {"facts": FACTS.model_copy(update={"host": "n1", "node_rank": 1})
                              .model_dump(), "time": 1.0e9, "nonce": "ab" * 16}
KEY = JobKey(b"0123456789abcdef0123")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Master:
    """``serve`` on a thread; ``result`` is its findings, or the exception it raised."""

    def __init__(self, expected: int = 1, wait_s: float = 60.0, key: JobKey | None = None,
                 host: str = "127.0.0.1", facts: NodeFacts = FACTS) -> None:
        self.port = free_port()
        self.refused: list[str] = []
        self.result: Any = None
        self.took = 0.0

        def run() -> None:
            started = time.monotonic()
            try:
                self.result = serve(self.port, expected, facts, wait_s, host=host, key=key,
                                    on_refuse=self.refused.append)
            except BaseException as exc:  # the test asserts what it was
                self.result = exc
            self.took = time.monotonic() - started

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def connect(self) -> socket.socket:
        return probe_master("127.0.0.1", self.port, wait_s=10)

    def finish(self, timeout: float = 30) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the master did not return"
        return self.result


def raw_line(body: str, mac: str | None = None, protocol: str = PROTOCOL) -> bytes:
    return (json.dumps({"protocol": protocol, "body": body, "mac": mac}) + "\n").encode()


def exchange(master: Master, line: bytes) -> dict[str, Any]:
    """Send one line as a peer; the master's one-line answer, parsed (body included)."""
    with master.connect() as conn:
        conn.sendall(line)
        conn.settimeout(10)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    envelope = json.loads(data)
    return dict(json.loads(envelope["body"]))


def good_node(master: Master, key: JobKey | None = None, **update: Any) -> list[Finding]:
    facts = FACTS.model_copy(update={"host": "n1", "node_rank": 1, **update})
    return join(master.connect(), facts, 20, f"127.0.0.1:{master.port}", key=key)


@pytest.fixture(scope="module")
def long_master() -> Iterator[Master]:
    """One master for many hostile examples; a good node joins at the end."""
    master = Master(expected=1, wait_s=100)
    yield master
    assert good_node(master) == []
    assert master.finish() == []


@pytest.mark.parametrize("field, value", [("time", "abc"), ("time", None), ("nonce", 7)])
def test_malformed_top_level_value_is_refused_with_one_line(long_master: Master, field: str,
                                                            value: Any) -> None:
    answer = exchange(long_master, raw_line(json.dumps({**GOOD_HELLO, field: value})))
    assert answer["findings"] == [] and answer["refused"].startswith("invalid hello (")
    assert field in answer["refused"] and "\n" not in answer["refused"]


@pytest.mark.parametrize("value", [[1], "1", -1, 10**30, 1.5, True, {"a": 1}])
def test_malformed_node_rank_is_refused(long_master: Master, value: Any) -> None:
    hello = {**GOOD_HELLO, "facts": {**GOOD_HELLO["facts"], "node_rank": value}}
    answer = exchange(long_master, raw_line(json.dumps(hello)))
    assert "facts.node_rank" in answer["refused"]
    assert long_master.thread.is_alive()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
FIELDS = [("facts", f) for f in NodeFacts.model_fields] + [(None, f) for f in ("time", "nonce")]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(FIELDS), value=JSON)
@example(where=(None, "time"), value="abc")
@example(where=("facts", "node_rank"), value=[1])
@example(where=("facts", "nproc_per_node"), value=99999999)
def test_any_bad_value_in_any_field_is_refused_not_raised(long_master: Master,
                                                          where: tuple[str | None, str],
                                                          value: Any) -> None:
    group, name = where
    hello = json.loads(json.dumps(GOOD_HELLO))
    (hello[group] if group else hello)[name] = value
    body = json.dumps(hello)
    try:
        decode(raw_line(body).rstrip(b"\n"), JobKey(None), Hello)
        assume(False)  # a valid value: it would join as the node
    except Refused:
        pass
    answer = exchange(long_master, raw_line(body))
    assert answer["refused"] and name in answer["refused"]
    assert long_master.thread.is_alive()


@pytest.mark.parametrize("line", [b"\x00\x01garbage\n", b"{}\n", b"[1,2]\n", b"\xff\xfe\n",
                                  raw_line("not json"), raw_line("{}", protocol="other/1")])
def test_lines_that_are_not_the_protocol_are_refused(long_master: Master, line: bytes) -> None:
    answer = exchange(long_master, line)
    assert answer["refused"].startswith(("not a distrun-node-sync/2 message",
                                         "invalid hello"))


def test_an_overlong_line_is_cut_off(long_master: Master) -> None:
    started = time.monotonic()
    answer = exchange(long_master, b"x" * (PEER_LINE_MAX + 5000))
    assert answer["refused"] == f"line longer than {PEER_LINE_MAX} bytes"
    assert time.monotonic() - started < 3


def test_slow_loris_does_not_hold_the_master_past_its_wait() -> None:
    master = Master(expected=1, wait_s=10)
    stop = threading.Event()

    def trickle() -> None:
        with master.connect() as conn:
            while not stop.wait(3.0):
                try:
                    conn.sendall(b"{")
                except OSError:
                    return

    clients = [threading.Thread(target=trickle, daemon=True) for _ in range(3)]
    for c in clients:
        c.start()
    result = master.finish(timeout=20)
    stop.set()
    assert isinstance(result, NodesMissing)
    assert master.took < 11.5
    assert "0 of 1 other node(s) joined the master within 10 s" in str(result)
    assert "no complete line before the deadline" in str(result)


def test_a_slow_peer_does_not_delay_a_good_node() -> None:
    master = Master(expected=1, wait_s=30)
    slow = master.connect()
    slow.sendall(b"{")
    started = time.monotonic()
    assert good_node(master) == []
    assert master.finish() == [] and time.monotonic() - started < 3
    slow.close()


def test_wrong_token_is_refused_on_both_sides() -> None:
    master = Master(expected=1, wait_s=3, key=KEY)
    with pytest.raises(NodesMissing, match="signed with another DISTRUN_JOB_TOKEN"):
        good_node(master, key=JobKey(b"another-secret-of-the-same-size"))
    result = master.finish()
    assert isinstance(result, NodesMissing)
    assert "refused: 127.0.0.1:" in str(result) and "another DISTRUN_JOB_TOKEN" in str(result)
    assert len(master.refused) == 1


def test_missing_token_on_the_node_is_refused() -> None:
    master = Master(expected=1, wait_s=3, key=KEY)
    with pytest.raises(NodesMissing, match="DISTRUN_JOB_TOKEN is not set here"):
        good_node(master, key=None)
    assert "is not signed (DISTRUN_JOB_TOKEN is not set there)" in str(master.finish())


def test_missing_token_on_the_master_is_refused() -> None:
    master = Master(expected=1, wait_s=3, key=None)
    with pytest.raises(NodesMissing, match="is not signed"):
        good_node(master, key=KEY)
    assert "DISTRUN_JOB_TOKEN is not set here" in str(master.finish())


def test_same_token_joins_and_a_replayed_message_is_refused() -> None:
    master = Master(expected=2, wait_s=5, key=KEY)
    line = encode(KEY, Hello.model_validate(GOOD_HELLO))
    first = master.connect()
    first.sendall(line)
    second = master.connect()
    second.sendall(line)
    result = master.finish()
    first.close()
    second.close()
    assert isinstance(result, NodesMissing)
    assert "1 of 2 other node(s) joined" in str(result) and "replayed" in str(result)


def test_signed_exchange_returns_the_findings() -> None:
    master = Master(expected=1, wait_s=10, key=KEY)
    assert good_node(master, key=KEY) == []
    assert master.finish() == []


def test_nodes_planning_different_process_counts_are_refused_naming_both() -> None:
    master = Master(expected=1, wait_s=10, facts=FACTS.model_copy(
        update={"nproc_per_node": 1, "world_size": 2}))
    found = good_node(master, nproc_per_node=2, world_size=4)
    assert found == master.finish()
    assert [(f.id, f.severity) for f in found] == [("nodes-differ-nproc", "error")]
    assert found[0].message.startswith("n0 (node 0) plans 1 process(es) per node, n1 (node 1) "
                                       "plans 2")
    assert "--nproc-per-node" in found[0].fix


def test_the_master_binds_the_master_address_only() -> None:
    master = Master(expected=1, wait_s=10, host="127.0.0.1")
    master.connect().close()  # listening now
    with socket.socket() as other:  # a wildcard bind would hold the port on 127.0.0.2 too
        other.bind(("127.0.0.2", master.port))
    assert good_node(master) == []
    master.finish()


def test_bind_address_follows_the_master_address() -> None:
    from tests.unit.test_network_checks import plan

    loop = plan(master="127.0.0.1")
    assert bind_address(loop, NetworkSetup(master_ip="127.0.0.1")) == "127.0.0.1"
    net = plan(master="10.201.0.1")
    assert bind_address(net, NetworkSetup(master_ip="10.201.0.1")) == "10.201.0.1"
    # Debian: the master's own name resolves to 127.0.1.1 here, the others reach 10.201.0.1
    assert bind_address(plan(master="n0"), NetworkSetup(
        master_ip="127.0.1.1", local_addr="10.201.0.1")) == "10.201.0.1"
    assert bind_address(net, NetworkSetup()) == ""


def test_job_key_warns_once_when_unset_or_weak() -> None:
    key, note = job_key({})
    assert key.secret is None and note is not None
    assert "unauthenticated" in note and "DISTRUN_JOB_TOKEN" in note and "\n" not in note
    assert job_key({"DISTRUN_JOB_TOKEN": "x" * 32}) == (JobKey(b"x" * 32), None)
    assert "only 3 characters" in str(job_key({"DISTRUN_JOB_TOKEN": "abc"})[1])


def test_a_forged_answer_is_not_believed() -> None:
    """A node with the token does not accept an unsigned or foreign 'all good' answer."""
    with socket.create_server(("127.0.0.1", 0)) as fake:
        port = fake.getsockname()[1]

        def answer() -> None:
            conn, _ = fake.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(encode(JobKey(None), Answer(nonce="00" * 16)))

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        conn = socket.create_connection(("127.0.0.1", port))
        with pytest.raises(NodesMissing, match="not signed"):
            join(conn, FACTS, 5, f"127.0.0.1:{port}", key=KEY)
        t.join(5)
