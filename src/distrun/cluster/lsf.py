"""IBM Spectrum LSF with jsrun (Summit-style): JSM_NAMESPACE_* per task, LSB_* per job."""

from __future__ import annotations

from collections.abc import Mapping

from distrun.cluster.base import ClusterEnvironment, RankFacts


class LSF(ClusterEnvironment):
    name = "lsf"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        return "LSB_JOBID" in env and "JSM_NAMESPACE_RANK" in env

    def facts(self) -> RankFacts:
        world = self.size("JSM_NAMESPACE_SIZE")
        local_size = self.optional_int("JSM_NAMESPACE_LOCAL_SIZE", minimum=1)
        rank = self.integer("JSM_NAMESPACE_RANK")
        return RankFacts(
            self.name,
            rank=rank,
            world_size=world,
            local_rank=self.integer("JSM_NAMESPACE_LOCAL_RANK", 0),
            local_world_size=local_size,
            node_rank=rank // local_size if local_size else 0,
            nnodes=-(-world // local_size) if local_size else None,
            master_addr=self.env.get("MASTER_ADDR") or _first_compute_host(self.env),
            master_port=self.optional_port("MASTER_PORT"),
        )


def _first_compute_host(env: Mapping[str, str]) -> str | None:
    """LSB_MCPU_HOSTS is 'launchhost 1 host1 42 host2 42': the first host after the launch node."""
    words = env.get("LSB_MCPU_HOSTS", "").split()
    hosts = words[0::2]
    return hosts[1] if len(hosts) > 1 else (hosts[0] if hosts else None)
