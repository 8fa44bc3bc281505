"""Real ``distrun launch --hostfile`` over real OpenSSH, across two namespace "hosts".

Each node of the test bed (tests/multinode/conftest.py) runs its own ``sshd`` (own config,
host key and authorized_keys under the test's tmp dir, listening on the node's address only).
The root namespace has no address on the bridge, so the launch itself runs on node 0 and
reaches both nodes (itself included) by address. The ssh client is the real /usr/bin/ssh,
pointed at a private config by an ``ssh`` early on PATH; this machine's /root/.ssh and
/etc/ssh are never read or written.

Every process carries the test's marker: the sshd command lines name a folder called after
it, and sshd gives each session ``DISTRUN_TEST_MARK`` (``SetEnv``), so the ``marker`` fixture
proves that no sshd, remote node or worker is left; the bed's teardown proves the namespaces
empty.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env
from tests.multinode.conftest import NODES, NetnsCluster, ns_name, ns_pids

# 'marker' before 'netns_cluster' before 'ssh_bed': the sshds stop first, then the namespaces
# are emptied, then the marker proves nothing is left anywhere.
pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.timeout(240)]

SSHD = "/usr/sbin/sshd"
SSH = "/usr/bin/ssh"
PORT = 29631

WORKER = '''
import datetime, os, socket, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.tensor([float(rank + 1)])
dist.all_reduce(x)
print(f"worker rank={rank} world={world} host={socket.gethostname()} sum={x.item():.0f}",
      flush=True)
if sys.argv[1:] == [f"--fail-rank={rank}"]:
    print(f"worker rank={rank} exits 7", flush=True)
    sys.exit(7)
dist.destroy_process_group()
'''


def why_no_ssh() -> str | None:
    for tool in (SSHD, SSH, "/usr/bin/ssh-keygen"):
        if not os.access(tool, os.X_OK):
            return f"{tool} not found (apt-get install openssh-server openssh-client)"
    if _root_locked(Path("/etc/shadow")):
        return ("root's account is locked ('!' in /etc/shadow): sshd refuses key logins to it "
                "with UsePAM no; unlock it with usermod -p '*' root")
    return None


def _root_locked(shadow: Path) -> bool:
    try:
        lines = shadow.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(line.startswith("root:!") for line in lines)


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "distrun-test", "-f",
                    str(path)], check=True, capture_output=True, timeout=30)
    return path.with_suffix(".pub").read_text(encoding="utf-8").strip()


def sshd_config(home: Path, node: int, addr: str, marker: str) -> Path:
    env = {"PYTHONPATH": str(REPO / "src"), "DISTRUN_TEST_MARK": marker,
           "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    text = "\n".join([
        f"ListenAddress {addr}:22", f"HostKey {home}/host_key", "PidFile none",
        f"AuthorizedKeysFile {home}/authorized_keys", "PubkeyAuthentication yes",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "PermitRootLogin prohibit-password", "StrictModes no", "PrintMotd no",
        "SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()), ""])
    path = home / f"sshd_config-n{node}"
    path.write_text(text, encoding="utf-8")
    return path


def client_files(home: Path, host_pub: str, addrs: list[str]) -> Path:
    """The private ssh config, its known_hosts, and an ``ssh`` on PATH that uses them."""
    (home / "known_hosts").write_text(f"{','.join(addrs)} {host_pub}\n", encoding="utf-8")
    (home / "ssh_config").write_text("\n".join([
        "Host *", "  User root", f"  IdentityFile {home}/client_key", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {home}/known_hosts", "  GlobalKnownHostsFile /dev/null",
        "  ConnectTimeout 10", "  LogLevel ERROR", ""]), encoding="utf-8")
    bin_dir = home / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    wrapper.write_text(f"#!/bin/sh\nexec {SSH} -F '{home}/ssh_config' \"$@\"\n",
                       encoding="utf-8")
    wrapper.chmod(0o755)
    return bin_dir


def wait_listening(cluster: NetnsCluster, node: int, proc: subprocess.Popen[str],
                   log: Path) -> None:
    probe = f"exec 3<>/dev/tcp/{cluster.addr(node)}/22"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd on n{node} exited: {log.read_text(encoding='utf-8')}")
        done = subprocess.run(["ip", "netns", "exec", ns_name(node), "bash", "-c", probe],
                              capture_output=True, timeout=10, check=False)
        if done.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"sshd on n{node} does not listen on {cluster.addr(node)}:22")


def describe(pids: dict[int, list[int]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for node, found in pids.items():
        for pid in found:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                cmd = "?"
            out.setdefault(node, []).append(f"{pid} {cmd[:120]}")
    return out


@dataclass
class SshBed:
    cluster: NetnsCluster
    marker: str
    home: Path
    bin_dir: Path
    sshds: list[subprocess.Popen[str]] = field(default_factory=list)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        path = f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
        return cli_env({"PYTHONPATH": str(REPO / "src"), "DISTRUN_TEST_MARK": self.marker,
                        "OMP_NUM_THREADS": "1", "PATH": path, **(extra or {})})

    def start_sshds(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        for i in range(NODES):
            log = self.home / f"sshd-n{i}.log"
            cfg = sshd_config(self.home, i, self.cluster.addr(i), self.marker)
            proc = self.cluster.start(i, [SSHD, "-D", "-f", str(cfg), "-E", str(log)],
                                      os.environ.copy(), self.home)
            self.sshds.append(proc)
            wait_listening(self.cluster, i, proc, log)

    def assert_only_sshds_left(self, wait_s: float = 15) -> None:
        """After the launch: every node's processes ended, save its sshd."""
        want = {i: [p.pid] for i, p in enumerate(self.sshds)}
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            left = {i: ns_pids(ns_name(i)) for i in range(NODES)}
            if left == want:
                return
            time.sleep(0.2)
        raise AssertionError(f"left on the nodes: {describe(left)} (sshds: {want})")

    def stop(self) -> None:
        for proc in self.sshds:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


@pytest.fixture
def ssh_bed(marker: str, netns_cluster: NetnsCluster, tmp_path: Path) -> Iterator[SshBed]:
    reason = why_no_ssh()
    if reason:
        pytest.skip(reason)
    home = tmp_path / marker  # in every sshd's and ssh's command line: the marker sees them
    home.mkdir(mode=0o700)
    host_pub = keygen(home / "host_key")
    (home / "authorized_keys").write_text(keygen(home / "client_key") + "\n",
                                          encoding="utf-8")
    addrs = [netns_cluster.addr(i) for i in range(NODES)]
    bed = SshBed(netns_cluster, marker, home, client_files(home, host_pub, addrs))
    try:
        bed.start_sshds()
        yield bed
    finally:
        bed.stop()


@dataclass
class Launch:
    rc: int
    out: str
    err: str
    argvs: list[str]
    took: float


def watch_argv(stop: threading.Event, seen: list[str]) -> None:
    """Every command line on this machine, sampled until ``stop`` (what ``ps`` would show)."""
    while not stop.is_set():
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                        seen.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
                except OSError:
                    pass
        stop.wait(0.05)


def launch(bed: SshBed, tmp_path: Path, *extra: str, args: tuple[str, ...] = (),
           env: dict[str, str] | None = None, timeout: float = 150) -> Launch:
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    hosts = "".join(f"{bed.cluster.addr(i)} slots=2\n" for i in range(NODES))
    (tmp_path / "hosts.txt").write_text(hosts, encoding="utf-8")
    argv = [sys.executable, "-m", "distrun.cli.main", "launch", "--hostfile", "hosts.txt",
            "--master-port", str(PORT), "--master-wait", "60", *extra, "worker.py", *args]
    stop, seen = threading.Event(), []
    watcher = threading.Thread(target=watch_argv, args=(stop, seen), daemon=True)
    watcher.start()
    started = time.monotonic()
    try:
        proc = bed.cluster.start(0, argv, bed.env(env), tmp_path)
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        watcher.join(timeout=10)
    return Launch(proc.returncode, out, err, seen, time.monotonic() - started)


def node_lines(out: str, addr: str) -> list[str]:
    prefix = f"[{addr}] "
    return [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]


def test_hostfile_launch_over_ssh_runs_every_rank(ssh_bed: SshBed, tmp_path: Path) -> None:
    done = launch(ssh_bed, tmp_path, "--local-ranks-filter", "0,1")
    assert done.rc == 0, done.out[-4000:] + done.err[-2000:]
    a0, a1 = ssh_bed.cluster.addr(0), ssh_bed.cluster.addr(1)
    every = [line for line in done.out.splitlines() if line.strip()]
    assert all(line.startswith((f"[{a0}] ", f"[{a1}] ")) for line in every), every
    for node, addr in enumerate((a0, a1)):
        lines = "\n".join(node_lines(done.out, addr))
        assert "distrun: all 2 nodes joined; starting torchrun" in lines
        assert "distrun: job succeeded (4 ranks)" in lines
        for rank in (2 * node, 2 * node + 1):  # ranks follow the hostfile's order
            assert f"worker rank={rank} world=4 host=n{node} sum=10" in lines
        # the token is not exported here: each node says its exchange is unsigned
        assert "the node exchange is unauthenticated: DISTRUN_JOB_TOKEN is not set" in lines
    assert not done.err.strip(), done.err
    assert "\x1b" not in done.out and "\r" not in done.out  # no remote terminal codes in a pipe
    ssh_bed.assert_only_sshds_left()


def test_the_job_token_reaches_every_node_and_is_shown_nowhere(ssh_bed: SshBed,
                                                               tmp_path: Path) -> None:
    token = secrets.token_hex(16)
    done = launch(ssh_bed, tmp_path, env={"DISTRUN_JOB_TOKEN": token})
    assert done.rc == 0, done.out[-4000:] + done.err[-2000:]
    for addr in (ssh_bed.cluster.addr(0), ssh_bed.cluster.addr(1)):
        lines = "\n".join(node_lines(done.out, addr))
        assert "distrun: all 2 nodes joined" in lines  # a signed exchange, same key on both
        assert "distrun: job succeeded (4 ranks)" in lines
    assert "DISTRUN_JOB_TOKEN" not in done.out  # neither the warning nor the hand-over line
    assert token not in done.out + done.err
    assert len(done.argvs) > 1000  # /proc was sampled all along the run
    assert [a for a in done.argvs if "distrun.cli.main launch --nnodes 2" in a]  # the nodes'
    assert [a for a in done.argvs if "IFS= read -r DISTRUN_JOB_TOKEN" in a]  # their shells
    assert not [a for a in done.argvs if token in a]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and token.encode() in
               p.read_bytes()]
    assert written == []  # run directories (env.json), logs, the test's own files
    ssh_bed.assert_only_sshds_left()


def failed_node(done: Launch, addr: str, rank: int) -> str:
    """What node ``addr`` showed; it names the failed rank, and the launch exits with its
    exit status."""
    lines = "\n".join(node_lines(done.out, addr))
    assert f"distrun: job failed: rank {rank} first" in lines, done.out[-4000:]
    assert f"worker rank={rank} exits 7" in lines
    shown = re.search(r"exit status (\d+)", lines)
    assert shown is not None and done.rc == int(shown.group(1)) == 7, (done.rc, lines[-3000:])
    return lines


def test_a_failing_rank_is_the_launch_exit_status(ssh_bed: SshBed, tmp_path: Path) -> None:
    done = launch(ssh_bed, tmp_path, args=("--fail-rank=1",))
    failed_node(done, ssh_bed.cluster.addr(0), 1)
    # node 1's ranks finished; its torchrun leaves the exit barrier as node 0's store goes away
    assert "distrun: job succeeded (4 ranks)" in "\n".join(
        node_lines(done.out, ssh_bed.cluster.addr(1)))
    ssh_bed.assert_only_sshds_left()


def test_a_failed_node_does_not_wait_for_the_others(ssh_bed: SshBed, tmp_path: Path) -> None:
    """Rank 3 (node 1) fails. Node 0's ranks finish, and its torchrun agent then waits up to
    300 s at its exit barrier for node 1's agent, which never comes. The launch returns at
    once with node 1's status and hangs node 0 up. The agent is blocked in C++ (store.wait),
    where the SIGHUP's Python handler cannot run: distrun.launch.unblock ends that wait, and
    node 0 is gone within seconds instead of 300 s."""
    done = launch(ssh_bed, tmp_path, args=("--fail-rank=3",))
    a1 = ssh_bed.cluster.addr(1)
    failed_node(done, a1, 3)
    assert f"distrun launch: {a1} ended with exit status 7; stopping the other nodes" in done.err
    assert done.took < 100, done.took
    ssh_bed.assert_only_sshds_left(wait_s=30)  # the old agent stayed 299 s
    events = [json.loads(line) for path in (tmp_path / "runs").glob("*-node0/events.jsonl")
              for line in path.read_text(encoding="utf-8").splitlines()]
    ends = [e for e in events if e["event"] == "job_finished"]
    assert [(e["status"], e["message"]) for e in ends] == [("interrupted", "received SIGHUP")]
