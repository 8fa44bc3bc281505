"""Open MPI (`mpirun`), and PMI / PMIx launchers (MPICH, Intel MPI, `srun --mpi=pmix`).

MPI gives no rendezvous address: MASTER_ADDR / MASTER_PORT must come from the
environment (`mpirun -x MASTER_ADDR=... -x MASTER_PORT=...`). On one node, the
default is 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Mapping

from distrun.cluster.base import ClusterEnvironment, RankFacts

# (rank, size, local rank, local size) per MPI family, in the order they are tried.
_VARIABLES = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)


class MPI(ClusterEnvironment):
    name = "mpi"

    @staticmethod
    def detect(env: Mapping[str, str]) -> bool:
        return any(rank in env and size in env for rank, size, _, _ in _VARIABLES)

    def facts(self) -> RankFacts:
        rank_v, size_v, local_v, lsize_v = next(
            v for v in _VARIABLES if v[0] in self.env and v[1] in self.env
        )
        rank, world = self.integer(rank_v), self.size(size_v)
        local_rank = self.integer(local_v, 0)
        local_size = self.optional_int(lsize_v, minimum=1)
        node_rank = rank // local_size if local_size else 0
        nnodes = -(-world // local_size) if local_size else None
        return RankFacts(
            self.name,
            rank=rank,
            world_size=world,
            local_rank=local_rank,
            local_world_size=local_size,
            # not OMPI_COMM_WORLD_NODE_RANK: that is the process's rank on its node (like the
            # local rank, counted across jobs), not the node's index
            node_rank=node_rank,
            nnodes=nnodes,
            master_addr=self.env.get("MASTER_ADDR", "127.0.0.1" if nnodes == 1 else None),
            master_port=self.optional_port("MASTER_PORT"),
        )
