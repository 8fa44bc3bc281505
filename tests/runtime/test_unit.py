"""The runtime over env dicts, in this process: no process group, no other process."""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import distrun
from distrun import cluster
from distrun.runtime import checks, context, device, logs
from distrun.runtime import jax as jax_runtime
from distrun.runtime.context import Context, init_method
from distrun.runtime.errors import InitError
from distrun.runtime.heartbeat import RECORD_BYTES

TORCHRUN = {"TORCHELASTIC_RUN_ID": "x", "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3",
            "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0", "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500"}
OMPI = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
        "OMPI_COMM_WORLD_LOCAL_RANK": "5", "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    distrun.shutdown()
    yield
    distrun.shutdown()


def facts(env: dict[str, str]) -> cluster.RankFacts:
    return cluster.detect(env).facts()


def test_single_process_context_and_heartbeat(tmp_path: Path) -> None:
    ctx = distrun.init(env={"DISTRUN_RUN_DIR": str(tmp_path)})
    assert (ctx.rank, ctx.local_rank, ctx.world_size, ctx.node_rank) == (0, 0, 1, 0)
    assert (ctx.device, ctx.backend, ctx.environment, ctx.is_main) == (
        torch.device("cpu"), None, "single", True)
    assert ctx.device.type == "cpu" and ctx.device_name == "cpu"
    assert distrun.init() is ctx and distrun.current() is ctx
    ctx.step(7, loss=0.25)
    beat = (tmp_path / "heartbeats" / "rank-0").read_bytes()
    assert len(beat) == RECORD_BYTES and beat.split()[1] == b"7"
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["rank_joined", "progress"]
    assert events[1]["metrics"] == {"loss": 0.25} and events[0]["device"] == "cpu"
    with pytest.raises(AttributeError):
        ctx.rank = 1  # type: ignore[misc]


def test_context_manager_shuts_down() -> None:
    with distrun.init(env={}) as ctx:
        assert distrun.current() is ctx
    assert distrun.current() is None


def test_backend_this_build_lacks_is_an_init_error() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    with pytest.raises(InitError) as err:
        distrun.init(backend="nccl", env=env)
    text = str(err.value)
    assert "backend 'nccl' is not available in this torch build" in text
    assert "a backend this build has: gloo" in text and "pass backend='gloo'" in text
    assert distrun.current() is None


def test_backend_from_the_launcher_variable_is_checked_too() -> None:
    with pytest.raises(InitError, match="'hccl' is not available"):
        distrun.init(env={"DISTRUN_BACKEND": "hccl"})


def test_vendor_backend_missing_names_the_fix() -> None:
    with pytest.raises(InitError) as err:
        device.choose_backend("npu", None)
    assert "needs backend hccl" in str(err.value) and "backend='gloo'" in str(err.value)
    assert device.choose_backend("cpu", None) == "gloo"


def test_unknown_framework() -> None:
    with pytest.raises(InitError, match="framework 'tf' is not supported"):
        distrun.init(framework="tf", env={})


def test_bad_timeout_variable() -> None:
    with pytest.raises(InitError, match="DISTRUN_PG_TIMEOUT='ten'"):
        distrun.init(env={"DISTRUN_PG_TIMEOUT": "ten"})


def test_local_rank_beyond_devices_explains_variable_value_and_setting() -> None:
    env = {**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1"}
    with pytest.raises(InitError) as err:
        checks.local_rank_fits(facts(env), "cuda", 2, env)
    text = str(err.value)
    assert text.startswith("LOCAL_RANK=3 (rank 3, started by torchelastic) but this node shows 2 "
                           "cuda device(s) (CUDA_VISIBLE_DEVICES=0,1): 4 processes were started")
    assert "invalid device ordinal" in text and "--nproc-per-node 2" in text
    checks.local_rank_fits(facts(env), "cuda", 4, env)  # fits: no error
    checks.local_rank_fits(facts(env), "cpu", 1, env)  # cpu has no ordinal


def test_local_rank_beyond_devices_under_mpirun_names_its_variable() -> None:
    with pytest.raises(InitError) as err:
        checks.local_rank_fits(facts(OMPI), "npu", 4, {**OMPI, "ASCEND_RT_VISIBLE_DEVICES": "0"})
    assert str(err.value).startswith("OMPI_COMM_WORLD_LOCAL_RANK=5 (rank 5, started by mpi)")
    assert "(ASCEND_RT_VISIBLE_DEVICES=0)" in str(err.value)
    assert "mpirun --map-by ppr:4:node" in str(err.value)


def test_two_ranks_on_one_device() -> None:
    with pytest.raises(InitError) as err:
        checks.distinct_devices([("n0", "cuda:0"), ("n0", "cuda:1"), ("n0", "cuda:0")])
    assert str(err.value).startswith("ranks 0 and 2 are both bound to cuda:0 on n0")
    checks.distinct_devices([("n0", "cuda:0"), ("n1", "cuda:0"), ("n0", "cpu"), ("n0", "cpu")])


def test_declared_inventory_sets_type_and_count() -> None:
    env = {"DISTRUN_INVENTORY": "1x8xgcu"}
    assert device.detect_type(env) == "gcu" and device.device_count("gcu", env) == 8
    assert device.detect_type({**env, "DISTRUN_DEVICE_TYPE": "cpu"}) == "cpu"
    with pytest.raises(InitError, match="DISTRUN_INVENTORY='8 gpus'"):
        device.detect_type({"DISTRUN_INVENTORY": "8 gpus"})


def test_detect_type_on_this_cpu_host() -> None:
    assert device.detect_type({}) == "cpu"
    assert device.detect_type({"DISTRUN_DEVICE_TYPE": "xpu"}) == "xpu"


def test_missing_extension_is_an_init_error() -> None:
    with pytest.raises(InitError, match="needs the module torch_mlu, which does not import"):
        device.namespace("mlu")


def test_init_method_from_facts_not_os_environ() -> None:
    assert init_method(facts(TORCHRUN)) == "tcp://10.0.0.1:29500"
    six = {**TORCHRUN, "MASTER_ADDR": "fd00::1"}
    assert init_method(facts(six)) == "tcp://[fd00::1]:29500"
    with pytest.raises(InitError, match="-x MASTER_ADDR -x MASTER_PORT"):
        init_method(facts(OMPI))


def test_jax_initialize_arguments() -> None:
    args = jax_runtime.initialize_args(facts(TORCHRUN), TORCHRUN, "cuda", 60)
    # torchrun's agent listens on MASTER_PORT: the coordinator takes the next port
    assert args == {"coordinator_address": "10.0.0.1:29501", "num_processes": 8,
                    "process_id": 3, "initialization_timeout": 60, "local_device_ids": [3]}
    manual = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "7000"}
    assert jax_runtime.initialize_args(facts(manual), manual, "cpu", 5) == {
        "coordinator_address": "h:7000", "num_processes": 2, "process_id": 1,
        "initialization_timeout": 5}
    assert jax_runtime.coordinator(facts(manual), {"DISTRUN_COORDINATOR_PORT": "9"}) == "h:9"


def test_batch_size() -> None:
    ctx = Context(1, 1, 4, 0, "cpu", "gloo", "manual")
    assert ctx.batch_size(64) == 16
    with pytest.raises(ValueError) as err:
        ctx.batch_size(30)
    assert str(err.value) == ("global batch size 30 does not divide into 4 processes; use a "
                              "multiple of 4, e.g. 28 or 32")


def test_print_only_on_main(capsys: pytest.CaptureFixture[str]) -> None:
    Context(1, 1, 2, 0, "cpu", "gloo", "manual").print("from one")
    Context(1, 1, 2, 0, "cpu", "gloo", "manual").print("from one, all", all_ranks=True)
    Context(0, 0, 2, 0, "cpu", "gloo", "manual").print("from zero")
    assert capsys.readouterr().out == "from one, all\nfrom zero\n"


def test_sampler_splits_the_data() -> None:
    parts = [list(Context(r, r, 2, 0, "cpu", "gloo", "manual").sampler(range(6), shuffle=False))
             for r in (0, 1)]
    assert parts == [[0, 2, 4], [1, 3, 5]]


def test_progress_is_the_plain_iterable_off_main() -> None:
    assert list(Context(1, 1, 2, 0, "cpu", "gloo", "manual").progress(range(3))) == [0, 1, 2]


def test_logger_main_to_stderr_others_to_their_own_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert logs.log_path(0, {}) is None
    assert logs.log_path(2, {"DISTRUN_RUN_DIR": "/r"}) is None  # launch captures stderr per rank
    path = logs.log_path(5, {"DISTRUN_LOG_DIR": str(tmp_path / "logs")})
    assert path == str(tmp_path / "logs" / "rank-5.log")
    other = Context(5, 1, 8, 0, "cpu", "gloo", "manual", log_path=path)
    other.logger.info("loss %.1f", 1.5)
    main = Context(0, 0, 8, 0, "cpu", "gloo", "manual")
    main.logger.warning("hello")
    for handler in other.logger.handlers:
        handler.flush()
    assert "[rank 5] INFO loss 1.5" in (tmp_path / "logs" / "rank-5.log").read_text()
    err = capsys.readouterr().err
    assert "[rank 0] WARNING hello" in err and "loss" not in err
    for name in ("distrun.rank0", "distrun.rank5"):
        for handler in logging.getLogger(name).handlers[:]:
            logging.getLogger(name).removeHandler(handler)
            handler.close()


def test_save_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    import torch

    ctx = Context(0, 0, 1, 0, "cpu", None, "single")
    target = tmp_path / "ckpt.pt"
    ctx.save({"w": torch.ones(2)}, target)
    assert torch.equal(torch.load(target)["w"], torch.ones(2))
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]
    with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
        ctx.save({"bad": lambda: 0}, tmp_path / "bad.pt")
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def test_no_group_kept_after_shutdown() -> None:
    assert not context._OWNS_GROUP


def test_mpirun_node_rank_is_the_node_not_the_rank_on_it() -> None:
    """Open MPI's OMPI_COMM_WORLD_NODE_RANK is the process's rank on its node (seen under
    mpirun 4.1: 0 and 1 for two ranks of one node); the node index comes from the layout."""
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
           "OMPI_COMM_WORLD_NODE_RANK": "1"}
    assert facts(env).node_rank == 0
    assert facts({**env, "OMPI_COMM_WORLD_RANK": "3"}).node_rank == 1


def test_jax_processes_sharing_a_gpu_get_the_memory_advice() -> None:
    env = {**TORCHRUN, "LOCAL_WORLD_SIZE": "4"}
    advice = jax_runtime.memory_advice(facts(env), env, "cuda", 2)
    assert advice is not None and advice.startswith("4 JAX processes on 2 cuda device(s)")
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in advice and "MEM_FRACTION=0.45" in advice
    assert jax_runtime.memory_advice(facts(env), env, "cuda", 4) is None  # one per device
    assert jax_runtime.memory_advice(facts(env), env, "cpu", 0) is None
    set_by_user = {**env, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert jax_runtime.memory_advice(facts(set_by_user), set_by_user, "cuda", 2) is None
