"""Manual: RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT exported by hand or by a
tool that uses torch's env:// convention (accelerate, DeepSpeed's launcher, a shell loop)."""

from __future__ import annotations

from collections.abc import Mapping

from distrun.cluster.base import ClusterEnvironment, RankFacts


class Manual(ClusterEnvironment):
    name = "manual"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        return "RANK" in env and "WORLD_SIZE" in env

    def facts(self) -> RankFacts:
        local_size = self.optional_int("LOCAL_WORLD_SIZE", minimum=1)
        world = self.size("WORLD_SIZE")
        rank = self.integer("RANK")
        return RankFacts(
            self.name,
            rank=rank,
            world_size=world,
            local_rank=self.integer("LOCAL_RANK", 0),
            local_world_size=local_size,
            node_rank=self.integer("NODE_RANK", self.integer("GROUP_RANK", 0)),
            nnodes=self.optional_int("NNODES", minimum=1),
            master_addr=self.env.get("MASTER_ADDR"),
            master_port=self.optional_port("MASTER_PORT"),
        )


class SingleProcess(ClusterEnvironment):
    """Nothing started this process as part of a job: world size 1."""

    name = "single"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        return True

    def facts(self) -> RankFacts:
        return RankFacts(self.name, 0, 1, 0, 1, 0, 1, None, None)
