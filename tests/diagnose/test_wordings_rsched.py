"""Wordings of the scheduler, config, tooling, network-port, code and JAX rules, from their sources.

Rules: slurm-allocation-mismatch, world-size-mismatch, wandb-login, no-launcher, address-in-use,
default-pg-not-initialized, ddp-unused-parameters, libuv-missing, jax-coordination,
jax-task-died, ascend-hccl. Each case is a short realistic log built around the real message;
the comment says where the message comes from. A case asserts the rule, the confidence class the
rule is meant to give (high for a strong signature, medium where the rule caps it or only
consequences were found, low for a weak wording or what a hung job prints last) and, where a
prefix names it, the rank. Negative cases are neighbouring categories' messages that must not
be taken by these rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.diagnose.wording import verdict_of_text as _diagnose

from distrun.diagnose import diagnose

TRACE = "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n    main()\n"
LIGHTNING_HEAD = ("GPU available: True (cuda), used: True\n"
                  "TPU available: False, using: 0 TPU cores\n")

# (log text, rule id, confidence, rank or None)
CASES: list[tuple[str, str, str, int | None]] = [
    # --- slurm-allocation-mismatch ----------------------------------------------------------
    # pytorch_lightning <= 1.5 accelerator_connector: rank_zero_info("Multi-processing is handled
    # by Slurm.") then "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8" and nothing more: the
    # sbatch script ran python without srun, rank 0 waits for 7 processes that never start
    ("Multi-processing is handled by Slurm.\n" + LIGHTNING_HEAD
     + "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/8\n",
     "slurm-allocation-mismatch", "low", None),
    # lightning >= 1.6 fabric/plugins/environments/slurm.py _validate_srun_used (PossibleUserWarning)
    ("Seed set to 42\n"
     "/opt/conda/lib/python3.10/site-packages/lightning/fabric/plugins/environments/slurm.py:204: "
     "The `srun` command is available on your system but is not used. HINT: If your intention is "
     "to run Lightning on SLURM, prepend your python command with `srun` like so: srun python "
     "train.py --devices 4 ...\n" + LIGHTNING_HEAD
     + "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4\n",
     "slurm-allocation-mismatch", "low", None),
    # lightning fabric/plugins/environments/slurm.py validate_settings (ValueError)
    (TRACE + "ValueError: You set `devices=4` in Lightning, but the number of tasks per node "
     "configured in SLURM `--ntasks-per-node=1` does not match. HINT: Set `devices=1`.\n",
     "slurm-allocation-mismatch", "high", None),
    # lightning slurm.py _validate_srun_variables (RuntimeError)
    (TRACE + "RuntimeError: You set `--ntasks=8` in your SLURM bash script, but this variable is "
     "not supported. HINT: Use `--ntasks-per-node=8` instead.\n",
     "slurm-allocation-mismatch", "high", None),
    # Slurm srun (src/srun/allocate.c / step_launch) step creation errors
    ("srun: error: Unable to create step for job 123456: More processors requested than permitted\n",
     "slurm-allocation-mismatch", "high", None),
    ("srun: error: Unable to allocate resources: Requested node configuration is not available\n",
     "slurm-allocation-mismatch", "high", None),
    # DeepSpeed launcher/multinode_runner.py SlurmRunner.validate_active_resources
    (TRACE + "ValueError: slurm backend cannot select specific device ids, got [1, 3] on node-1. "
     "Filter whole hosts, or keep the first N slots on every host.\n",
     "slurm-allocation-mismatch", "low", None),
    # Slurm src/common/slurm_errno.c ESLURM_BAD_THREAD_PER_CORE (strong) and
    # ESLURM_REQUESTED_NODES_NOT_IN_PARTITION (weak: also a wrong partition)
    ("srun: error: Unable to create step for job 77: Cannot request more threads per core than the "
     "job allocation\n",
     "slurm-allocation-mismatch", "high", None),
    ("sbatch: error: Batch job submission failed: Requested nodes not in this partition\n",
     "slurm-allocation-mismatch", "low", None),
    # --- world-size-mismatch ------------------------------------------------------------------
    # DeepSpeed runtime/config.py _batch_assertion
    (TRACE + "AssertionError: Check batch related parameters. train_batch_size is not equal to "
     "micro_batch_per_gpu * gradient_acc_step * world_size 256 != 8 * 1 * 8\n",
     "world-size-mismatch", "high", None),
    (TRACE + "AssertionError: Micro batch size per gpu: 0 has to be greater than 0\n",
     "world-size-mismatch", "high", None),
    (TRACE + "AssertionError: Gradient accumulation steps: 0 has to be greater than 0\n",
     "world-size-mismatch", "high", None),
    # Megatron-LM arguments.py (space) and megatron-core parallel_state.py (underscore)
    (TRACE + "AssertionError: world size (6) is not divisible by tensor model parallel size (4)\n",
     "world-size-mismatch", "high", None),
    (TRACE + "RuntimeError: world_size (8) is not divisible by tensor_model_parallel_size (4) x "
     "pipeline_model_parallel_size (4) x context_parallel_size (1)\n",
     "world-size-mismatch", "high", None),
    # torch distributed_c10d.py new_group / split_group and device_mesh.py
    ("[rank0]: ValueError: the new group's world size should be less or equal to the world size "
     "set by init_process_group\n",
     "world-size-mismatch", "high", 0),
    ("[rank3]: ValueError: Rank 9 is out of range. Valid ranks are 0 to 7 (world_size=8)\n",
     "world-size-mismatch", "high", 3),
    ("RuntimeError: DeviceMesh only support homogeneous hardware, but found 6 ranks and 4 cuda "
     "devices!\n",
     "world-size-mismatch", "high", None),
    # NCCL ncclInvalidArgument at communicator init (a rank the world size does not hold)
    (TRACE + "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/../c10d/NCCLUtils.hpp:82, "
     "invalid argument, NCCL version 2.4.8\n",
     "world-size-mismatch", "low", None),
    # torch distributed_c10d _store_based_barrier (torch < 2.0), default group key 1
    ("Waiting in store based barrier to initialize process group for rank: 0, key: "
     "store_based_barrier_key:1 (world_size=16, worker_count=8, timeout=0:30:00)\n",
     "world-size-mismatch", "high", None),
    # --- wandb-login --------------------------------------------------------------------------
    # wandb sdk/wandb_login.py _login: no key and no tty
    ("wandb: Using wandb-core as the SDK backend.\n"
     "wandb: ERROR api_key not configured (no-tty). call wandb.login(key=[your_api_key])\n",
     "wandb-login", "high", None),
    (TRACE + "wandb.errors.UsageError: api_key not configured (no-tty). call "
     "wandb.login(key=[your_api_key])\n",
     "wandb-login", "high", None),
    ("[rank0]: wandb.errors.errors.UsageError: api_key not configured (no-tty). call "
     "wandb.login(key=[your_api_key])\n",
     "wandb-login", "high", 0),
    # wandb sdk/wandb_run.py / preinit: wandb.log on a rank without wandb.init
    ("[rank1]: wandb.errors.Error: You must call wandb.init() before wandb.log()\n",
     "wandb-login", "high", 1),
    # the interactive prompt in a job without a terminal (sdk/lib/apikey.py)
    ("wandb: (1) Create a W&B account\nwandb: (2) Use an existing W&B account\n"
     "wandb: (3) Don't visualize my results\nwandb: Enter your choice:\n",
     "wandb-login", "high", None),
    # wandb sdk/lib/retry.py: server unreachable (weak: a network problem)
    ("wandb: Network error (ConnectionError), entering retry loop.\n",
     "wandb-login", "low", None),
    # wandb.errors.CommError on init timeout (weak)
    ("wandb: ERROR Run initialization has timed out after 90.0 sec. Please try increasing the "
     "timeout with the `init_timeout` setting\n",
     "wandb-login", "low", None),
    # a rank hung in wandb.init: the spinner's line is the last thing it printed
    ("Loading checkpoint shards: 100%|##########| 2/2\nwandb: Waiting for wandb.init()...\n",
     "wandb-login", "low", None),
    # --- address-in-use -----------------------------------------------------------------------
    # torch c10d socket.cpp (libuv store, torch >= 2.4)
    ("[W socket.cpp:697] [c10d] The server socket has failed to listen on any local network "
     "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address "
     "already in use\n",
     "address-in-use", "high", None),
    # the same under a German locale (glibc po/de strerror(EADDRINUSE))
    ("RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - Die Adresse "
     "wird bereits verwendet).\n",
     "address-in-use", "high", None),
    # French and Russian locales, Python's OSError
    ("OSError: [Errno 98] Adresse d\u00e9j\u00e0 utilis\u00e9e\n",
     "address-in-use", "high", None),
    ("OSError: \u0410\u0434\u0440\u0435\u0441 \u0443\u0436\u0435 \u0438\u0441\u043f\u043e\u043b"
     "\u044c\u0437\u0443\u0435\u0442\u0441\u044f\n",
     "address-in-use", "high", None),
    # Simplified Chinese locale (Debian's zh_CN libc.mo), gloo's bind error
    ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] bind: "
     "\u5730\u5740\u5df2\u5728\u4f7f\u7528\n",
     "address-in-use", "high", None),
    # Docker daemon (publishing a container's port)
    ("docker: Error response from daemon: driver failed programming external connectivity on "
     "endpoint trainer: Bind for 0.0.0.0:29500 failed: port is already allocated.\n",
     "address-in-use", "high", None),
    # TensorBoard program.py
    ("E1109 10:11:12.123456 tensorboard: TensorBoard could not bind to port 6006, it was already "
     "in use\n",
     "address-in-use", "high", None),
    # gloo transport/tcp (enforce) and Go/gRPC listeners
    ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] bind: "
     "Address already in use\n",
     "address-in-use", "high", None),
    # --- no-launcher ------------------------------------------------------------------------
    # torch distributed/rendezvous.py _env_rendezvous_handler
    (TRACE + "ValueError: Error initializing torch.distributed using env:// rendezvous: "
     "environment variable RANK expected, but not set\n",
     "no-launcher", "high", None),
    (TRACE + "    local_rank = int(os.environ['LOCAL_RANK'])\n"
     "  File \"/usr/lib/python3.10/os.py\", line 680, in __getitem__\n"
     "    raise KeyError(key) from None\nKeyError: 'LOCAL_RANK'\n",
     "no-launcher", "high", None),
    # --- default-pg-not-initialized ---------------------------------------------------------
    (TRACE + "ValueError: Default process group has not been initialized, please make sure to "
     "call init_process_group.\n",
     "default-pg-not-initialized", "high", None),
    # Megatron-LM core/parallel_state.py
    (TRACE + "AssertionError: data parallel group is not initialized\n",
     "default-pg-not-initialized", "high", None),
    (TRACE + "AssertionError: tensor model parallel group is not initialized\n",
     "default-pg-not-initialized", "high", None),
    # --- ddp-unused-parameters --------------------------------------------------------------
    # torch csrc/distributed/c10d/reducer.cpp
    ("[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before "
     "starting a new one. This error indicates that your module has parameters that were not used "
     "in producing loss.\n",
     "ddp-unused-parameters", "high", 1),
    # --- libuv-missing ----------------------------------------------------------------------
    # torch csrc/distributed/c10d/TCPStore.cpp (>= 2.4, Windows builds)
    ("torch.distributed.DistStoreError: use_libuv was requested but PyTorch was build without "
     "libuv support, run with USE_LIBUV=0 to disable it.\n",
     "libuv-missing", "high", None),
    # --- jax-coordination -------------------------------------------------------------------
    # xla/tsl coordination_service.cc CheckBarrierTimeout on the registration barrier
    ("jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: "
     "[Init]Wait_for_all_tasks_to_register::0. This usually happens because a task triggered the "
     "barrier too early or too slowly. Please look at the task logs (both timed out and first "
     "task) to debug further.\n",
     "jax-coordination", "medium", None),
    ("# of tasks that reached the barrier: 1/2.\n",
     "jax-coordination", "medium", None),
    # jax/_src/distributed.py argument checks
    (TRACE + "TypeError: process_id must be a nonnegative int. Got process_id=-1\n",
     "jax-coordination", "medium", None),
    # coordination_service.cc LogConnectStatusLocked: a start-up that hangs
    ("I0510 07:28:04.417845 1398 coordination_service.cc:624] Initializing CoordinationService\n"
     "I0510 07:28:04.428285 1398 coordination_service.cc:1010] Waiting for 1/2 tasks to connect.\n"
     "I0510 07:28:04.428290 1398 coordination_service.cc:1013] Example stragglers:\n"
     "/job:jax_worker/replica:0/task:1\n",
     "jax-coordination", "low", None),
    # --- jax-task-died (secondary: only consequences, medium) -----------------------------------
    ("jaxlib.xla_extension.XlaRuntimeError: ABORTED: Barrier failed because service is shutting "
     "down. Barrier_id: PjRT_Client_Connect\n",
     "jax-task-died", "medium", None),
    ("UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n"
     "/job:jax_worker/replica:0/task:3\nThe tasks have crashed.\n",
     "jax-task-died", "medium", None),
    # --- ascend-hccl (capped at medium) ---------------------------------------------------------
    ("RuntimeError: createHCCLComm:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:2166 HCCL "
     "function error: HcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), "
     "error code is 7\n",
     "ascend-hccl", "medium", None),
]


@pytest.mark.parametrize(("text", "rule", "confidence", "rank"), CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_wording_names_its_rule(tmp_path: Path, text: str, rule: str, confidence: str,
                                rank: int | None) -> None:
    assert _diagnose(tmp_path, text) == (rule, confidence, rank)


# A neighbouring category's message must not be taken by the rules above.
NEGATIVES: list[tuple[str, str]] = [
    # NCCL's invalid *usage* (two ranks on one GPU) is not an invalid argument
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage "
     "(run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
     "Last error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000\n",
     "duplicate-gpu"),
    # a cannot-assign address (wrong MASTER_ADDR) is not a port in use
    ("[W socket.cpp:697] [c10d] The client socket has failed to connect to [node-0]:29500 "
     "(errno: 110 - Connection timed out).\n"
     "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying "
     "to connect to (node-0, 29500).\n",
     "rendezvous-timeout"),
    # a device index beyond the visible GPUs is the device rule, not the world size
    ("[rank5]: RuntimeError: CUDA error: invalid device ordinal\n",
     "cuda-invalid-device-ordinal"),
    # a Slurm time limit is the job being stopped, not an allocation mismatch
    ("slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2024-05-10T07:28:04 DUE TO TIME "
     "LIMIT ***\n",
     "stopped-externally"),
    # wandb's relogin hint on a run that later ran out of device memory
    ("wandb: Currently logged in as: someone. Use `wandb login --relogin` to force relogin\n"
     "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n",
     "cuda-out-of-memory"),
    # an XLA task that crashed itself (out of memory) before the others report it died
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
     "allocate 17179869184 bytes.\n",
     "cuda-out-of-memory"),
]


@pytest.mark.parametrize(("text", "rule"), NEGATIVES, ids=[n[1] for n in NEGATIVES])
def test_neighbouring_message_keeps_its_own_rule(tmp_path: Path, text: str, rule: str) -> None:
    assert _diagnose(tmp_path, text)[0] == rule


def test_lightning_slurm_run_that_went_on_is_not_a_hang(tmp_path: Path) -> None:
    # Lightning prints the srun hint on a healthy run too; the processes registered after it
    log = tmp_path / "job.log"
    log.write_text(
        "/x/lightning/fabric/plugins/environments/slurm.py:204: The `srun` command is available on "
        "your system but is not used. HINT: If your intention is to run Lightning on SLURM, "
        "prepend your python command with `srun` like so: srun python fit.py ...\n"
        + LIGHTNING_HEAD
        + "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
        "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n"
        "distributed_backend=gloo\n"
        "All distributed processes registered. Starting with 2 processes\n",
        encoding="utf-8")
    result = diagnose([log])
    assert not result.causes and not result.unrecognised


def test_lightning_fit_that_ended_after_the_srun_hint_is_not_a_hang(tmp_path: Path) -> None:
    # examples/lightning_trainer.py's rank-0 log under distrun launch (Lightning 2.6): no
    # model summary, no registration line, then fit_loop.py's end of fit
    log = tmp_path / "rank-0.log"
    log.write_text(
        "GPU available: False, used: False\n"
        "/x/lightning/fabric/plugins/environments/slurm.py:204: The `srun` command is available on "
        "your system but is not used. HINT: If your intention is to run Lightning on SLURM, "
        "prepend your python command with `srun` like so: srun python fit.py ...\n"
        "lightning_trainer: 2 ranks on cpu (gloo): loss 6.4608 -> 0.0443\n"
        "`Trainer.fit` stopped: `max_epochs=4` reached.\n",
        encoding="utf-8")
    result = diagnose([log])
    assert not result.causes and not result.unrecognised


def test_slurm_hint_before_a_real_error_names_the_error(tmp_path: Path) -> None:
    # the tail only speaks for a log with no error line at all
    log = tmp_path / "job.log"
    log.write_text("Multi-processing is handled by Slurm.\n" + LIGHTNING_HEAD
                   + "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                   "2.00 GiB\n", encoding="utf-8")
    assert _diagnose(tmp_path, log.read_text(encoding="utf-8"))[0] == "cuda-out-of-memory"


def test_wandb_run_that_went_on_is_not_a_hang(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("wandb: Waiting for wandb.init()...\n"
                   "wandb: Tracking run with wandb version 0.17.0\n"
                   "wandb: Syncing run glowing-sun-3\nstep 100 loss 1.23\n", encoding="utf-8")
    result = diagnose([log])
    assert not result.causes and not result.unrecognised
