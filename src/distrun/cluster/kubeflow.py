"""Kubeflow PyTorchJob: the training operator sets MASTER_ADDR/PORT, WORLD_SIZE and RANK per pod.

Without torchrun in the container, one pod is one process: RANK is the pod's rank and
WORLD_SIZE the number of pods (replicas). With torchrun in the pod, torchrun's variables win
(TorchElastic is detected first).
"""

from __future__ import annotations

from collections.abc import Mapping

from distrun.cluster.base import ClusterEnvironment, RankFacts


class Kubeflow(ClusterEnvironment):
    name = "kubeflow"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        keys = ("KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
        return all(k in env for k in keys)

    def facts(self) -> RankFacts:
        world = self.size("WORLD_SIZE")
        rank = self.integer("RANK")
        return RankFacts(
            self.name,
            rank=rank,
            world_size=world,
            local_rank=0,
            local_world_size=1,
            node_rank=rank,
            nnodes=world,
            master_addr=self.env["MASTER_ADDR"],
            master_port=self.port("MASTER_PORT"),
        )
