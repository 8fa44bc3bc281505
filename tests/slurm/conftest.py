"""A real Slurm for the tests: munged, slurmctld and two slurmd from Debian's packages.

Mode "multi-local": two nodes ``tb0``/``tb1`` = two slurmd on this host (Debian builds Slurm
with --enable-multiple-slurmd), everything on 127.0.0.1, on ports the kernel found free when
the bed started (so a second bed, or anything else listening, does not collide with it). Nothing is
written outside a private folder: daemons and clients find the configuration through
``SLURM_CONF``. The daemons run in a private mount namespace whose /etc/resolv.conf names no
DNS server, and jobs inherit it, so torch's reverse look-ups of peers never leave the machine.
Teardown cancels the jobs, stops by PID only what this fixture started (TERM, then KILL after
10 s) and fails if any process carrying its mark is left.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.conftest import processes_with

NODES = ("tb0", "tb1")
TOOLS = ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo", "munge",
         "unmunge", "unshare", "mount")
MUNGED = "/usr/sbin/munged"
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


@dataclass
class SlurmCluster:
    base: Path
    env: dict[str, str]
    mark: str
    pidfiles: list[Path] = field(default_factory=list)

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def client_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """What a client (sbatch, distrun export --submit) needs to reach this cluster."""
        return {"SLURM_CONF": self.env["SLURM_CONF"], **(extra or {})}

    def job(self, job_id: str) -> dict[str, str]:
        out = self.run("scontrol", "-o", "show", "job", job_id).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def wait_job(self, job_id: str, timeout: float) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        info = self.job(job_id)
        while info.get("JobState") not in TERMINAL and time.monotonic() < deadline:
            time.sleep(0.5)
            info = self.job(job_id)
        return info

    def log_tail(self) -> str:
        parts = []
        for log in sorted((self.base / "log").glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-8:]
            parts.append(f"== {log.name}\n" + "\n".join(lines))
        return "\n".join(parts)


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to start munged, slurmctld and slurmd"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing or not Path(MUNGED).exists():
        return (f"Slurm test bed tools missing ({', '.join(missing) or MUNGED}): apt-get install "
                "slurmctld slurmd slurm-client munge (./dev test does it as root)")
    return None


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now (all held open until each is known)."""
    held = [socket.socket() for _ in range(count)]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def _hardware() -> str:
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30,
                         check=True, env={"PATH": os.environ["PATH"]}).stdout
    m = re.search(r"CPUs=.*ThreadsPerCore=\d+", out)
    if not m:
        raise RuntimeError(f"'slurmd -C' printed no hardware line: {out!r}")
    return m.group(0)


def _write_config(base: Path, ctld_port: int, node_ports: list[int]) -> Path:
    host = socket.gethostname().split(".")[0]
    hw = _hardware()
    run, state, log = base / "run", base / "state", base / "log"
    for d in (run, state / "ctld", log, base / "etc"):
        d.mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=distruntest", f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "MailProg=/bin/true", "JobRequeue=0",
        f"SlurmctldPidFile={run}/slurmctld.pid", f"SlurmdPidFile={run}/slurmd-%n.pid",
        f"SlurmctldLogFile={log}/slurmctld.log", f"SlurmdLogFile={log}/slurmd-%n.log",
        f"StateSaveLocation={state}/ctld", f"SlurmdSpoolDir={state}/slurmd-%n",
        "ReturnToService=2", "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0",
        "MinJobAge=300", "KillWait=5", "Waittime=0",
        *(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} {hw} "
          "RealMemory=1000 State=UNKNOWN" for name, port in zip(NODES, node_ports, strict=True)),
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    conf = base / "etc" / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    # slurmd 22.05 always loads a cgroup plugin; naming v1 keeps it from probing (nothing uses it)
    (base / "etc" / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
    (base / "etc" / "resolv.conf").write_text("# no DNS server\noptions timeout:1 attempts:1\n")
    return conf


def _sandboxed(base: Path, *argv: str) -> list[str]:
    """argv run in a private mount namespace whose /etc/resolv.conf names no DNS server."""
    script = 'mount --bind "$0" /etc/resolv.conf && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
            str(base / "etc" / "resolv.conf"), *argv]


def _munge_works() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5, check=False)
        if cred.returncode != 0:
            return False
        back = subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=5,
                              check=False)
    except subprocess.TimeoutExpired:
        return False
    return back.returncode == 0


def _start_munged(cluster: SlurmCluster) -> None:
    if _munge_works():
        return
    key = Path("/etc/munge/munge.key")
    if not key.exists() or key.stat().st_size == 0:
        subprocess.run(["mungekey", "--create", "--force"], check=True, timeout=30)
    for path, mode in (("/run/munge", 0o755), ("/var/log/munge", 0o700),
                       ("/var/lib/munge", 0o711)):
        Path(path).mkdir(mode=mode, exist_ok=True)
        shutil.chown(path, "munge", "munge")
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    subprocess.run(["runuser", "-u", "munge", "--", MUNGED], env=cluster.env, check=True,
                   timeout=30)
    cluster.pidfiles.append(Path("/run/munge/munged.pid"))
    _wait(_munge_works, 5, "munged did not answer (see /var/log/munge/munged.log)")


def _wait(ready: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.3)
    raise RuntimeError(what)


def _nodes_idle(cluster: SlurmCluster) -> bool:
    out = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=10).stdout.split("\n")
    states = {line.split()[0]: line.split()[1] for line in out if line.strip()}
    return set(states) == set(NODES) and set(states.values()) == {"idle"}


def _start(cluster: SlurmCluster) -> None:
    _start_munged(cluster)
    run = cluster.base / "run"
    cluster.pidfiles.append(run / "slurmctld.pid")
    subprocess.run(_sandboxed(cluster.base, "slurmctld", "-i"), env=cluster.env, check=True,
                   timeout=30)
    for name in NODES:
        (cluster.base / "state" / f"slurmd-{name}").mkdir(parents=True, exist_ok=True)
        cluster.pidfiles.append(run / f"slurmd-{name}.pid")
        subprocess.run(_sandboxed(cluster.base, "slurmd", "-N", name), env=cluster.env,
                       check=True, timeout=30)
    try:
        _wait(lambda: _nodes_idle(cluster), 30, "nodes not idle within 30 s")
    except RuntimeError as err:
        raise RuntimeError(f"{err}\n{cluster.log_tail()}") from None


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _stop(cluster: SlurmCluster) -> None:
    jobs = cluster.run("squeue", "-h", "-o", "%i", timeout=10).stdout.split()
    if jobs:
        cluster.run("scancel", "--full", *jobs, timeout=10)
        _wait(lambda: not cluster.run("squeue", "-h", "-o", "%i", timeout=10).stdout.strip(),
              20, f"jobs {jobs} still queued 20 s after scancel")
    procs = []
    for pidfile in cluster.pidfiles:
        pid = _pid_in(pidfile)
        if pid is not None and psutil.pid_exists(pid):
            proc = psutil.Process(pid)
            proc.send_signal(signal.SIGTERM)
            procs.append(proc)
    _, alive = psutil.wait_procs(procs, timeout=10)
    for proc in alive:
        proc.kill()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.mktemp("slurm")
    mark = f"dtm-slurm-{uuid.uuid4().hex[:12]}"
    ctld_port, *node_ports = _free_ports(1 + len(NODES))
    conf = _write_config(base, ctld_port, node_ports)
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": str(conf), "DISTRUN_TEST_MARK": mark,
           "LANG": "C.UTF-8"}
    cluster = SlurmCluster(base, env, mark)
    try:
        _start(cluster)
        yield cluster
    finally:
        _stop(cluster)
        left = processes_with(mark)
        for proc in left:
            proc.kill()
        assert not left, f"Slurm test bed left processes: {[(p.pid, p.name()) for p in left]}"
