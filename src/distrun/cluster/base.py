"""The one interface every launch environment implements, and the facts it yields."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from distrun.errors import UsageError
from distrun.model.userfile import shown

# An integer as launchers write it: ASCII digits, optionally Slurm's "N(xM)" / "N,M" forms
# (the first count). Not int()'s "+5", "5_000", " 5" or non-ASCII digits.
_INTEGER = re.compile(r"-?[0-9]{1,12}")
PORT_MAX = 65535


class ClusterEnvError(UsageError):
    """A launcher variable is present but malformed (bad input: exit status 2)."""


@dataclass(frozen=True)
class RankFacts:
    """Where this process sits in the job, as its launcher described it.

    Consistent by construction: 0 <= rank < world_size, and the same for the local rank.
    """

    environment: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None
    node_rank: int
    nnodes: int | None
    master_addr: str | None
    master_port: int | None

    def __post_init__(self) -> None:
        for what, rank, size in (("rank", self.rank, self.world_size),
                                 ("local rank", self.local_rank, self.local_world_size)):
            if size is not None and not 0 <= rank < size:
                raise ClusterEnvError(
                    f"{self.environment}: {what} {rank} is outside a world of {size}",
                    f"0 <= {what} < {size}", "check the rank and size variables the launcher "
                    "set (or that you exported)")


class ClusterEnvironment(ABC):
    """A launch environment, read from a mapping passed in (never os.environ directly)."""

    name: ClassVar[str]

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    @staticmethod
    @abstractmethod
    def detect(env: Mapping[str, str]) -> bool:
        """True when ``env`` was set up by this launcher."""

    @abstractmethod
    def facts(self) -> RankFacts:
        """The rank, world and master facts this launcher gives the process."""

    def integer(self, var: str, default: int | None = None, minimum: int = 0,
                maximum: int | None = None) -> int:
        """``int(env[var])`` in ``[minimum, maximum]``, with an error naming variable and value."""
        raw = self.env.get(var)
        if raw is None or raw == "":
            if default is None:
                raise ClusterEnvError(
                    f"{self.name}: {var} is not set",
                    f"{var} set by the {self.name} launcher",
                    f"start the job through the launcher, or export {var}",
                )
            return default
        first = raw.split("(")[0].split(",")[0]
        if not _INTEGER.fullmatch(first):
            raise ClusterEnvError(f"{self.name}: {var}={shown(raw)} is not an integer",
                                  "an integer", f"unset {var} or set it to an integer")
        value = int(first)
        if value < minimum or (maximum is not None and value > maximum):
            top = f" and {maximum}" if maximum is not None else ""
            raise ClusterEnvError(f"{self.name}: {var}={shown(raw)} is out of range",
                                  f"an integer between {minimum}{top}",
                                  f"unset {var} or set it to a value in range")
        return value

    def optional_int(self, var: str, minimum: int = 0, maximum: int | None = None) -> int | None:
        return self.integer(var, minimum=minimum, maximum=maximum) if self.env.get(var) else None

    def size(self, var: str, default: int | None = None) -> int:
        """A world or group size: at least 1."""
        return self.integer(var, default, minimum=1)

    def port(self, var: str, default: int | None = None) -> int:
        return self.integer(var, default, minimum=1, maximum=PORT_MAX)

    def optional_port(self, var: str) -> int | None:
        return self.optional_int(var, minimum=1, maximum=PORT_MAX)
