"""The torchrun invocation of one node as a value: what ``--dry-run`` shows is what runs.

One :class:`Invocation` per node of a plan. It has exactly two renderings: :meth:`argv`
(display, ``plan.json``, exporters; :func:`command_line` quotes it) and the namespace that
``torch.distributed.run.config_from_args`` receives, which ``distrun.launch.torchrun`` builds by
parsing :meth:`argv` with torchrun's own parser (argparse stays out of this package).

Rendezvous ids follow torchrun: the id the user gives, else torchrun's default ``none``, the
same on every node (a random id per node would split a multi-node job). ``--standalone`` is
rendered as such: torchrun itself then picks ``localhost:0`` and a random id for its one node.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from distrun.errors import UsageError
from distrun.model.limits import NODES_MAX

DEFAULT_PORT = 29500
"""torchrun's rendezvous port when none is given (``--master-port``, ``--rdzv-endpoint HOST``)."""

TORCHRUN_DEFAULT_ID = "none"

Flag = tuple[str, str | None]
"""A torchrun flag passed through as given: ``("--max-restarts", "3")``, ``("--run-path", None)``."""


@dataclass(frozen=True)
class Nnodes:
    """``--nnodes N`` or ``MIN:MAX`` (elastic); parsed once, here."""

    min: int
    max: int

    @classmethod
    def parse(cls, text: str | int) -> Nnodes:
        raw = str(text).strip()
        low, sep, high = raw.partition(":")
        try:
            lo, hi = int(low), int(high if sep else low)
        except ValueError:
            raise UsageError(f"--nnodes {raw!r} is not a number", "N or MIN:MAX",
                             "pass e.g. --nnodes 2") from None
        if not 0 < lo <= hi <= NODES_MAX:
            raise UsageError(f"--nnodes {raw!r} is out of range", f"0 < MIN <= MAX <= {NODES_MAX}",
                             "pass e.g. --nnodes 2 or --nnodes 1:4")
        return cls(lo, hi)

    @property
    def elastic(self) -> bool:
        return self.min != self.max

    def __str__(self) -> str:
        return f"{self.min}:{self.max}" if self.elastic else str(self.max)


def parse_conf(text: str | None) -> tuple[tuple[str, str], ...]:
    """``--rdzv-conf k1=v1,k2=v2`` as pairs (torchrun's own syntax)."""
    pairs = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--rdzv-conf item {item!r} is not KEY=VALUE",
                             "KEY=VALUE[,KEY=VALUE...]", "pass e.g. --rdzv-conf timeout=900")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


@dataclass(frozen=True)
class Rendezvous:
    """How the nodes meet: ``standalone`` (one node, torchrun picks everything), ``static``
    (``--master-addr``/``--master-port``, ranks by ``--node-rank``) or ``dynamic`` (a
    ``--rdzv-backend`` such as c10d at ``--rdzv-endpoint``, ranks decided when they meet)."""

    kind: Literal["standalone", "static", "dynamic"]
    backend: str = "c10d"
    endpoint: str = ""
    master_addr: str = ""
    master_port: int = 0
    rdzv_id: str = TORCHRUN_DEFAULT_ID
    conf: tuple[tuple[str, str], ...] = ()

    def conf_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.conf)

    def with_conf(self, key: str, value: str) -> Rendezvous:
        """``conf`` with ``key`` set unless the user set it already."""
        if any(k == key for k, _ in self.conf):
            return self
        return replace(self, conf=(*self.conf, (key, value)))


@dataclass(frozen=True)
class WorkerCommand:
    """What every process runs: a script, ``-m module``, or a ``--no-python`` executable."""

    target: str
    args: tuple[str, ...] = ()
    module: bool = False
    no_python: bool = False

    def argv(self) -> list[str]:
        flags = ["-m"] if self.module else []
        flags += ["--no-python"] if self.no_python else []
        return [*flags, self.target, *self.args]


@dataclass(frozen=True)
class Invocation:
    """One node's torchrun: rendezvous, topology, local address, passthrough flags, worker."""

    rendezvous: Rendezvous
    nnodes: Nnodes
    nproc: int
    node_rank: int
    worker: WorkerCommand
    local_addr: str | None = None
    flags: tuple[Flag, ...] = ()

    def rendezvous_argv(self) -> list[str]:
        r = self.rendezvous
        if r.kind == "standalone":
            out = ["--standalone"]
        elif r.kind == "static":
            out = ["--nnodes", str(self.nnodes), "--node-rank", str(self.node_rank),
                   "--master-addr", r.master_addr, "--master-port", str(r.master_port)]
        else:
            out = ["--nnodes", str(self.nnodes), "--rdzv-backend", r.backend,
                   "--rdzv-endpoint", r.endpoint]
        if r.kind != "standalone" and r.rdzv_id != TORCHRUN_DEFAULT_ID:
            out += ["--rdzv-id", r.rdzv_id]
        if r.conf:
            out += ["--rdzv-conf", r.conf_text()]
        return out

    def worker_argv(self) -> list[str]:
        """Everything after the rendezvous and local address: the same on every node."""
        return ["--nproc-per-node", str(self.nproc), *flag_argv(self.flags), *self.worker.argv()]

    def argv(self, program: str = "torchrun") -> list[str]:
        local = ["--local-addr", self.local_addr] if self.local_addr else []
        return [program, *self.rendezvous_argv(), *local, *self.worker_argv()]


def flag_argv(flags: Iterable[Flag]) -> list[str]:
    out: list[str] = []
    for flag, value in flags:
        out += [flag] if value is None else [flag, value]
    return out


def quote_all(argv: Iterable[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def command_line(argv: Sequence[str], env: Iterable[tuple[str, str]] = ()) -> str:
    """A shell line: ``VAR=value ... argv``, every part quoted."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in env]
    return " ".join([*prefix, quote_all(argv)]) if prefix else quote_all(argv)
