"""The one interface every launch environment implements, and the facts it yields."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from distrun.errors import DistrunError


class ClusterEnvError(DistrunError):
    """A launcher variable is present but malformed."""


@dataclass(frozen=True)
class RankFacts:
    """Where this process sits in the job, as its launcher described it."""

    environment: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None
    node_rank: int
    nnodes: int | None
    master_addr: str | None
    master_port: int | None


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

    def integer(self, var: str, default: int | None = None) -> int:
        """``int(env[var])`` with an error naming the variable and value."""
        raw = self.env.get(var)
        if raw is None or raw == "":
            if default is None:
                raise ClusterEnvError(
                    f"{self.name}: {var} is not set",
                    f"{var} set by the {self.name} launcher",
                    f"start the job through the launcher, or export {var}",
                )
            return default
        try:
            return int(raw.split("(")[0].split(",")[0])
        except ValueError:
            raise ClusterEnvError(
                f"{self.name}: {var}={raw!r} is not an integer",
                "an integer",
                f"unset {var} or set it to an integer",
            ) from None

    def optional_int(self, var: str) -> int | None:
        return self.integer(var) if self.env.get(var) else None
