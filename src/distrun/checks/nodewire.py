"""The node exchange on the wire: validated messages, a per-job HMAC, bounded reads.

Every line is one JSON object ``{"protocol", "body", "mac"}``: ``body`` is the message as a JSON
*string* and ``mac`` the hex HMAC-SHA256 of that string's UTF-8 bytes under the job token
(``DISTRUN_JOB_TOKEN``, the same on every node), or null when no token is set. The body is then
validated field by field (:class:`Hello` from a node, :class:`Answer` from the master): a wrong
type, a value out of range or an unknown shape is refused as a value, never an exception.

Reads are bounded in bytes (:data:`PEER_LINE_MAX` from a node, :data:`ANSWER_LINE_MAX` from the
master) and in *total* time: the deadline covers the whole line, so a peer sending one byte every
few seconds is dropped when its deadline passes, not when it stops sending.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distrun.model.limits import NODES_MAX, NPROC_MAX
from distrun.model.plan import Finding

PROTOCOL: Literal["distrun-node-sync/2"] = "distrun-node-sync/2"
TOKEN_VAR = "DISTRUN_JOB_TOKEN"
PEER_LINE_MAX = 16 * 1024
ANSWER_LINE_MAX = 4 * 1024 * 1024
TOKEN_MIN = 16

M = TypeVar("M", bound=BaseModel)
Short = Annotated[str, Field(max_length=256)]
Nonce = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


class NodeFacts(BaseModel):
    """What one node says about itself; every field checked (strict types, bounded sizes)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    host: Short
    node_rank: Annotated[int, Field(ge=0, lt=NODES_MAX)] | None = None
    python: Short | None = None
    python_minor: Short | None = None
    torch: Short | None = None
    distrun: Short | None = None
    driver: Short | None = None
    git: Short | None = None
    nproc_per_node: Annotated[int, Field(ge=1, le=NPROC_MAX)] | None = None
    nnodes: Annotated[int, Field(ge=1, le=NODES_MAX)] | None = None
    world_size: Annotated[int, Field(ge=1, le=NODES_MAX * NPROC_MAX)] | None = None


class Hello(BaseModel):
    """A node's one message: its facts, its clock, a fresh nonce the answer must echo."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", allow_inf_nan=False)

    facts: NodeFacts
    time: float
    nonce: Nonce


class Answer(BaseModel):
    """The master's one message: the findings for every node, or why this node was refused."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    nonce: Nonce
    findings: Annotated[list[Finding], Field(max_length=10_000)] = []
    refused: Short | None = None


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    protocol: Literal["distrun-node-sync/2"]
    body: str
    mac: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None


class Refused(Exception):
    """A line that is not a valid, authentic message; ``str()`` is one line saying why."""


@dataclass(frozen=True)
class JobKey:
    """The per-job secret, or None (the exchange then runs unauthenticated, with a warning)."""

    secret: bytes | None

    def sign(self, body: str) -> str | None:
        if self.secret is None:
            return None
        return hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()

    def check(self, env: Envelope) -> None:
        if self.secret is None and env.mac is not None:
            raise Refused(f"the peer signs with a job token but {TOKEN_VAR} is not set here")
        if self.secret is not None and env.mac is None:
            raise Refused(f"the peer's message is not signed ({TOKEN_VAR} is not set there)")
        expected = self.sign(env.body)
        if expected is not None and not hmac.compare_digest(expected, env.mac or ""):
            raise Refused(f"the peer's message is signed with another {TOKEN_VAR}")


def job_key(env: Mapping[str, str]) -> tuple[JobKey, str | None]:
    """The key from ``DISTRUN_JOB_TOKEN``, and a one-line warning when it is unset or weak."""
    token = env.get(TOKEN_VAR, "")
    if not token:
        return JobKey(None), (
            f"the node exchange is unauthenticated: {TOKEN_VAR} is not set (set the same "
            f"secret in the environment of every node's distrun launch, e.g. export "
            f"{TOKEN_VAR}=$(openssl rand -hex 16), passed by your scheduler or ssh)")
    if len(token) < TOKEN_MIN:
        return JobKey(token.encode()), (
            f"{TOKEN_VAR} is only {len(token)} characters: use at least {TOKEN_MIN} random ones "
            "(e.g. $(openssl rand -hex 16))")
    return JobKey(token.encode()), None


def new_nonce() -> str:
    return secrets.token_hex(16)


def encode(key: JobKey, message: BaseModel) -> bytes:
    body = message.model_dump_json()
    env = Envelope(protocol=PROTOCOL, body=body, mac=key.sign(body))
    return (env.model_dump_json() + "\n").encode()


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "message"
    return f"{where}: {err['msg']}"


def decode(line: bytes, key: JobKey, model: type[M]) -> M:
    """The validated message in ``line``, or :class:`Refused` saying in one line why not."""
    try:
        env = Envelope.model_validate_json(line)
    except ValidationError as exc:
        raise Refused(f"not a {PROTOCOL} message ({first_error(exc)})") from None
    key.check(env)
    try:
        return model.model_validate_json(env.body)
    except ValidationError as exc:
        raise Refused(f"invalid {model.__name__.lower()} ({first_error(exc)})") from None


def read_line(conn: socket.socket, deadline: float, limit: int) -> bytes:
    """One line (without the newline) read before ``deadline`` (monotonic), at most ``limit``."""
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Refused("no complete line before the deadline")
        if len(buf) > limit:
            raise Refused(f"line longer than {limit} bytes")
        conn.settimeout(min(left, 1.0))
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            continue
        except OSError as exc:
            raise Refused(f"connection error ({exc.strerror or exc})") from None
        if not chunk:
            raise Refused("the peer closed the connection")
        buf += chunk
    line = buf.split(b"\n", 1)[0]
    if len(line) > limit:
        raise Refused(f"line longer than {limit} bytes")
    return line


def send(conn: socket.socket, data: bytes, timeout: float = 2.0) -> bool:
    """Send within ``timeout``; False when the peer is gone or does not read."""
    try:
        conn.settimeout(timeout)
        conn.sendall(data)
    except OSError:
        return False
    return True
