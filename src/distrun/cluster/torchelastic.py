"""torchrun / torch.distributed.elastic (also `distrun launch`, which starts torchrun's agent)."""

from __future__ import annotations

from collections.abc import Mapping

from distrun.cluster.base import ClusterEnvironment, RankFacts


class TorchElastic(ClusterEnvironment):
    name = "torchelastic"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        return "TORCHELASTIC_RUN_ID" in env and "RANK" in env

    def facts(self) -> RankFacts:
        world = self.size("WORLD_SIZE")
        local_world = self.size("LOCAL_WORLD_SIZE", 1)
        return RankFacts(
            self.name,
            rank=self.integer("RANK"),
            world_size=world,
            local_rank=self.integer("LOCAL_RANK", 0),
            local_world_size=local_world,
            node_rank=self.integer("GROUP_RANK", 0),
            nnodes=max(1, world // local_world) if local_world else None,
            master_addr=self.env.get("MASTER_ADDR"),
            master_port=self.optional_port("MASTER_PORT"),
        )
