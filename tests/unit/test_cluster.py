from __future__ import annotations

import pytest

from distrun import cluster
from distrun.cluster import ClusterEnvError, SlurmAllocation

TORCHRUN = {"TORCHELASTIC_RUN_ID": "x", "RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "5",
            "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0", "MASTER_ADDR": "n0", "MASTER_PORT": "29500"}
SLURM = {"SLURM_JOB_ID": "1234", "SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
         "SLURM_NODEID": "1", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "8(x2)",
         "SLURM_JOB_NODELIST": "gpu[07-08]"}
OMPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
KUBEFLOW = {"KUBERNETES_PORT": "tcp://10.0.0.1:443", "MASTER_ADDR": "job-master-0",
            "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "2"}


def test_torchrun_variables() -> None:
    facts = cluster.detect(TORCHRUN).facts()
    assert (facts.environment, facts.rank, facts.local_rank, facts.world_size) == (
        "torchelastic", 5, 5, 16)
    assert (facts.nnodes, facts.master_addr, facts.master_port) == (2, "n0", 29500)


def test_slurm_task_variables_and_master_from_the_node_list() -> None:
    facts = cluster.detect(SLURM).facts()
    assert (facts.environment, facts.rank, facts.local_rank, facts.node_rank) == ("slurm", 9, 1, 1)
    assert (facts.world_size, facts.nnodes, facts.local_world_size) == (16, 2, 8)
    assert facts.master_addr == "gpu07"
    assert facts.master_port == 10000 + 1234 % 20000


def test_torchrun_inside_slurm_is_torchrun() -> None:
    assert cluster.detect({**SLURM, **TORCHRUN}).name == "torchelastic"


def test_mpirun_inside_an_sbatch_script_is_mpi() -> None:
    facts = cluster.detect({**SLURM, **OMPI}).facts()
    assert facts.environment == "mpi" and facts.rank == 3 and facts.local_rank == 1
    assert facts.node_rank == 1 and facts.nnodes == 2


def test_kubeflow_pod_is_one_process() -> None:
    facts = cluster.detect(KUBEFLOW).facts()
    assert facts.environment == "kubeflow" and facts.rank == 2 and facts.world_size == 3
    assert facts.master_addr == "job-master-0"


def test_manual_and_single() -> None:
    manual = cluster.detect({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h",
                             "MASTER_PORT": "1"}).facts()
    assert manual.environment == "manual" and manual.rank == 1
    assert cluster.detect({}).facts().world_size == 1


def test_lsf_jsrun() -> None:
    env = {"LSB_JOBID": "7", "JSM_NAMESPACE_RANK": "7", "JSM_NAMESPACE_SIZE": "12",
           "JSM_NAMESPACE_LOCAL_RANK": "1", "JSM_NAMESPACE_LOCAL_SIZE": "6",
           "LSB_MCPU_HOSTS": "batch1 1 a01 42 a02 42"}
    facts = cluster.detect(env).facts()
    assert (facts.environment, facts.node_rank, facts.master_addr) == ("lsf", 1, "a01")


def test_malformed_variable_names_variable_and_value() -> None:
    with pytest.raises(ClusterEnvError) as err:
        cluster.detect({**TORCHRUN, "WORLD_SIZE": "sixteen"}).facts()
    assert "WORLD_SIZE='sixteen'" in str(err.value)


def test_slurm_allocation() -> None:
    alloc = SlurmAllocation.from_env({**SLURM, "SLURM_GPUS_ON_NODE": "8"})
    assert alloc is not None
    assert alloc.nodes == ("gpu07", "gpu08") and alloc.master_addr == "gpu07"
    assert alloc.node_id == 1 and alloc.gpus_on_node == 8
