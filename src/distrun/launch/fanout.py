"""``distrun launch --hostfile hosts.txt``: one ``distrun launch`` per host, started over ssh.

The hostfile has DeepSpeed's format: ``host slots=N`` per line, ``#`` comments. Host k runs
``distrun launch --nnodes N --node-rank k --master-addr <first host> --master-port P
[--nproc-per-node slots] <the rest of your command>`` in the same directory, with the same
Python. ``--dry-run`` prints those ssh commands (shlex-quoted) and starts nothing.

DISTRUN_JOB_TOKEN (the key of the nodes' exchange, distrun.checks.nodewire), when set here,
reaches every node on the ssh connection's stdin, never on a command line (the local ssh's
and the remote shell's are both in ``ps``) and never in a file. ssh -tt gives the remote a
terminal that echoes what it reads, so the remote shell first turns the echo off, then says
it is ready (:data:`TOKEN_READY`, a line the relay swallows), and only then is the token
written; it reads one line into the variable and exports it to ``distrun launch``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from distrun.checks.nodewire import TOKEN_VAR
from distrun.errors import UsageError
from distrun.model.invocation import DEFAULT_PORT
from distrun.model.plan import Request
from distrun.model.terminal import strip_control, to_console
from distrun.model.userfile import read_user_text

# -tt: the remote command gets a terminal, so it is hung up (SIGHUP) when the ssh ends
SSH = ("ssh", "-tt", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new")
OWN_FLAGS = {"--hostfile": 1, "--dry-run": 0}
TOKEN_READY = "distrun: echo off, ready for the job token"
TOKEN_MAX = 1024
# the remote shell: no echo (-tt's terminal would show the token), ready, one line, exported
TOKEN_READ = (f"stty -echo && echo '{TOKEN_READY}' && IFS= read -r {TOKEN_VAR} && "
              f"export {TOKEN_VAR} && ")


@dataclass(frozen=True)
class Host:
    name: str
    slots: int | None


# A host name (RFC 1123 labels, optionally user@) or an IPv4/IPv6 address; never an ssh option.
HOST_NAME = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9._-]{0,63}@)?"
                       r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\[?[0-9A-Fa-f:.]+\]?)")
MAX_HOSTS = 100_000


def check_host(name: str, where: str) -> str:
    """``name`` when it is a host name or address; a UsageError else (``-oProxyCommand=...``)."""
    if len(name) > 253 or not HOST_NAME.fullmatch(name):
        raise UsageError(f"{where}: {name[:80]!r} is not a host name or address",
                         "letters, digits, '-', '.' (an optional user@ first), or an IP address",
                         "write one 'hostname slots=N' per line; a host never starts with '-'")
    return name


def parse_hostfile(text: str, path: str) -> list[Host]:
    hosts: list[Host] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, *rest = line.split()
        check_host(name, f"{path}:{n}")
        slots = None
        for item in rest:
            key, _, value = item.partition("=")
            if key != "slots" or not value.isdigit() or int(value) < 1:
                raise UsageError(f"{path}:{n}: {raw.strip()!r} is not 'host slots=N'",
                                 fix="write one 'hostname slots=N' per line (N >= 1)")
            slots = int(value)
        hosts.append(Host(name, slots))
        if len(hosts) > MAX_HOSTS:
            raise UsageError(f"hostfile {path} names more than {MAX_HOSTS} hosts",
                             fix="split the job, or check that this is the right file")
    if not hosts:
        raise UsageError(f"hostfile {path} names no host", fix="write one 'hostname slots=N' "
                         "per line")
    return hosts


def read_hostfile(path: str) -> list[Host]:
    text = read_user_text(path, "hostfile", "pass the path of a file with 'host slots=N' lines")
    return parse_hostfile(text, path)


def strip_own(flags: Sequence[str]) -> list[str]:
    """The launcher flags minus --hostfile/--dry-run (in any spelling argparse accepts)."""
    out: list[str] = []
    skip = 0
    for arg in flags:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in OWN_FLAGS:
            skip = OWN_FLAGS[name] if "=" not in arg else 0
            continue
        out.append(arg)
    return out


def check_request(req: Request, hosts: Sequence[Host]) -> None:
    given = [flag for flag, value in (("--nnodes", req.nnodes), ("--node-rank", req.node_rank),
                                      ("--rdzv-endpoint", req.rdzv_endpoint),
                                      ("--standalone", req.standalone or None))
             if value is not None]
    if given:
        raise UsageError(f"--hostfile sets the topology, but {', '.join(given)} was given too",
                         fix=f"drop {', '.join(given)}: the hostfile's {len(hosts)} hosts are "
                             "the nodes, the first one is the master")
    slots = {h.slots for h in hosts if h.slots is not None}
    if len(slots) > 1 and req.nproc_per_node is None:
        raise UsageError(f"the hostfile gives different slots per host ({sorted(slots)})",
                         fix="give every host the same slots=N, or pass --nproc-per-node")


def job_token(env: Mapping[str, str]) -> str | None:
    """DISTRUN_JOB_TOKEN when set; a UsageError (that never shows it) when the nodes' terminal
    could not pass it as one line: a control character, or too long."""
    token = env.get(TOKEN_VAR) or None
    if token is not None and (len(token) > TOKEN_MAX or
                              any(not " " <= c <= "~" for c in token)):
        raise UsageError(f"{TOKEN_VAR} is longer than {TOKEN_MAX} characters or holds a "
                         "character other than printable ASCII (its value is not shown)",
                         fix=f"export {TOKEN_VAR}=$(openssl rand -hex 16)")
    return token


def node_commands(argv: Sequence[str], script_at: int, req: Request, hosts: Sequence[Host],
                  cwd: str, *, python: str = sys.executable, token: bool = False
                  ) -> list[list[str]]:
    """One ssh argv per host; ``argv[script_at]`` is the training script. With ``token``, the
    remote shell first reads DISTRUN_JOB_TOKEN from the connection (see :func:`run_all`)."""
    check_request(req, hosts)
    flags, rest = strip_own(argv[:script_at]), list(argv[script_at:])
    master = req.master_addr or hosts[0].name
    port = req.master_port if req.master_port is not None else DEFAULT_PORT
    out = []
    for k, host in enumerate(hosts):
        topo = ["--nnodes", str(len(hosts)), "--node-rank", str(k)]
        if req.master_addr is None:
            topo += ["--master-addr", master]
        if req.master_port is None:
            topo += ["--master-port", str(port)]
        if host.slots is not None and req.nproc_per_node is None:
            topo += ["--nproc-per-node", str(host.slots)]
        remote = [python, "-m", "distrun.cli.main", "launch", *topo, *flags, *rest]
        line = f"{TOKEN_READ if token else ''}cd {shlex.quote(cwd)} && {shlex.join(remote)}"
        out.append([*SSH, "--", check_host(host.name, "host"), line])
    return out


def _send_token(proc: subprocess.Popen[str], token: str) -> None:
    """The token as one line on the node's stdin, then end of input (as /dev/null gave)."""
    if proc.stdin is None:
        return
    try:
        proc.stdin.write(token + "\n")
        proc.stdin.close()
    except (OSError, ValueError):  # the ssh is gone (its exit status says why), or closed
        pass


def _relay(stream: IO[str], prefix: str, sink: IO[str],
           answer: Callable[[], None] | None = None) -> None:
    """Copy a node's output to the console; when the console goes away (a pipe into head),
    keep reading, so the node's ssh never blocks on a full pipe and the job goes on. The
    first :data:`TOKEN_READY` line is not shown: it calls ``answer`` (sends the token).
    The remote side has a terminal (``-tt``) and may colour its output: the colours reach a
    terminal here, not a file or a pipe."""
    shown: IO[str] | None = sink
    plain = not _is_terminal(sink)
    for line in stream:
        text = line.replace("\r", "")
        text = strip_control(text) if plain else text
        if answer is not None and text.rstrip("\n") == TOKEN_READY:
            answer()
            answer = None
            continue
        shown = to_console(shown, prefix + text)


def _is_terminal(sink: IO[str]) -> bool:
    """A console that is a terminal (a closed one is not)."""
    try:
        return sink.isatty()
    except (OSError, ValueError):
        return False


def first_failure(procs: Sequence[subprocess.Popen[str]], poll_s: float = 0.2
                  ) -> tuple[int, int | None]:
    """Wait until every node ended with 0 (``(0, None)``) or one ended with another status:
    ``(status, its index)``. A node that fails does not wait for the others: torchrun's agent on
    a node that succeeded would wait up to 300 s at its exit barrier for the failed one."""
    while True:
        codes = [p.poll() for p in procs]
        failed = next((k for k, c in enumerate(codes) if c not in (None, 0)), None)
        code = codes[failed] if failed is not None else None
        if failed is not None and code is not None:
            return (code if code > 0 else 128 - code), failed  # ssh killed: 128 + signal
        if all(c == 0 for c in codes):
            return 0, None
        time.sleep(poll_s)


def _answer(proc: subprocess.Popen[str], token: str | None) -> Callable[[], None] | None:
    return None if token is None else lambda: _send_token(proc, token)


def run_all(commands: Sequence[list[str]], hosts: Sequence[Host], token: str | None = None
            ) -> int:
    """Start every node's ssh, relay output with a host prefix; on the first node that fails,
    hang up the others and return its status. With ``token`` (the commands were made with
    ``token=True``), each node gets it on stdin once it says it is ready."""
    stdin = subprocess.PIPE if token is not None else subprocess.DEVNULL
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=stdin) for cmd in commands]
    relays = [threading.Thread(target=_relay, args=(p.stdout, f"[{h.name}] ", sys.stdout,
                                                    _answer(p, token)), daemon=True)
              for p, h in zip(procs, hosts, strict=True)]
    for t in relays:
        t.start()
    code = 1
    try:
        code, failed = first_failure(procs)
        if failed is not None and any(p.poll() is None for p in procs):
            print(f"distrun launch: {hosts[failed].name} ended with exit status {code}; "
                  "stopping the other nodes", file=sys.stderr, flush=True)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()  # the remote side is hung up (-tt)
        for p in procs:
            p.wait()
            if p.stdin is not None and not p.stdin.closed:
                p.stdin.close()
    for t in relays:
        t.join(timeout=2)
    return code
