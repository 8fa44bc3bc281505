from __future__ import annotations

import pytest

from distrun import cluster
from distrun.cluster import ClusterEnvError, SlurmAllocation, slurm

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


# `scontrol -o show node tb0` from the Slurm 22.05 test bed (tests/slurm): name != address.
SHOW_NODE = ("NodeName=tb0 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 "
             "CPULoad=1.89 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) "
             "NodeAddr=127.0.0.1 NodeHostName=vm Port=16818 Version=22.05.8 OS=Linux "
             "6.18.44-fc-v657 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 AllocMem=0 "
             "State=IDLE ThreadsPerCore=1 Partitions=debug\n")


def never_called(name: str, env: object) -> str:
    raise AssertionError(f"scontrol asked about {name} although it resolves")


def test_node_name_that_resolves_is_the_master_without_scontrol() -> None:
    assert slurm.node_address("gpu07", {}, show=never_called, lookup=lambda n: True) == "gpu07"


def test_node_name_that_does_not_resolve_becomes_its_node_addr() -> None:
    asked: list[str] = []

    def show(name: str, env: object) -> str:
        asked.append(name)
        return SHOW_NODE

    assert slurm.node_address("tb0", {}, show=show, lookup=lambda n: False) == "127.0.0.1"
    assert asked == ["tb0"]


def test_node_without_an_address_says_to_export_master_addr() -> None:
    with pytest.raises(ClusterEnvError) as err:
        slurm.node_address("tb0", {}, show=lambda n, e: "", lookup=lambda n: False)
    assert "'tb0' does not resolve" in str(err.value) and "MASTER_ADDR" in str(err.value)


def test_srun_task_master_addr_wins_and_needs_no_lookup() -> None:
    facts = cluster.detect({**SLURM, "MASTER_ADDR": "10.1.2.3"}).facts()
    assert facts.master_addr == "10.1.2.3"
    assert slurm.reachable_master(facts, {**SLURM, "MASTER_ADDR": "10.1.2.3"}) is facts
