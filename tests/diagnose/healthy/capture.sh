#!/usr/bin/env bash
# Regenerates the healthy-run fixtures in this folder: every one is the exact output
# (stdout and stderr together, as a terminal shows them) of a successful run on this
# machine, CPU and gloo, 2 processes. Only the machine's host name is replaced by "node01";
# nothing else is edited or cut (the runs are short; the Trainer's progress bar is one line
# when its output is not a terminal). Provenance of each fixture: SOURCES.md.
#
#   cd REPO && tests/diagnose/healthy/capture.sh [NAME...]     (default: all)
#
# Environment: PY (default /work/main/.venv/bin/python) with torch, lightning, accelerate,
# deepspeed, mmengine installed (requirements-test.txt). Each run has a time limit; GNU
# timeout kills the whole process group it leads, so no worker outlives it.
set -u
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$REPO/tests/diagnose/healthy
PY=${PY:-/work/main/.venv/bin/python}
BIN=$(dirname "$PY")
HOST=$(hostname)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH=$REPO/src PYTHONUNBUFFERED=1
LIMIT=300

# the run's output, the host name replaced, kept only if the run exited 0
keep() {  # keep NAME RC FILE
  local name=$1 rc=$2 file=$3
  if [ "$rc" != 0 ]; then
    echo "capture: $name: exit $rc, not kept; its output:" >&2; tail -30 "$file" >&2; return 1
  fi
  sed -E "s/\\b$HOST\\b/node01/g" "$file" >"$HERE/$name.log"
  echo "capture: $name: $(wc -c <"$HERE/$name.log") bytes"
}

run() {  # run NAME CMD...   (in a fresh directory under $WORK)
  local name=$1; shift
  mkdir -p "$WORK/$name" && (cd "$WORK/$name" && timeout -k 10 $LIMIT "$@" >"$WORK/$name.out" 2>&1)
  keep "$name" $? "$WORK/$name.out"
}

# TORCH_DISTRIBUTED_DEBUG=DETAIL: plain collectives. (DDP under DETAIL dies with SIGSEGV after
# the Reducer is made in torch 2.13.0 CPU, so it is no healthy run; DDP gets DEBUG=INFO.)
torchrun_detail() {
  TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_CPP_LOG_LEVEL=INFO LOGLEVEL=INFO \
    run torchrun-collectives-detail "$BIN/torchrun" --nproc-per-node 2 \
    "$HERE/jobs/collectives.py"
}

# DDP, debug logging on, --tee 3 and --log-dir; plus rank 0's own files from the log dir
torchrun_ddp() {
  TORCH_DISTRIBUTED_DEBUG=INFO TORCH_CPP_LOG_LEVEL=INFO LOGLEVEL=INFO \
    run torchrun-ddp-tee "$BIN/torchrun" --nproc-per-node 2 --tee 3 \
    --log-dir "$WORK/torchrun-logs" "$REPO/examples/ddp.py" || return
  local dir; dir=$(find "$WORK/torchrun-logs" -path '*attempt_0/0' -type d | head -1)
  keep torchrun-logdir-rank0-stdout 0 "$dir/stdout.log"
  keep torchrun-logdir-rank0-stderr 0 "$dir/stderr.log"
}

# distrun launch: its terminal output, and its run directory (less env.json, the machine's
# environment) as diagnose reads it after the job: plan, events, launcher and rank logs
distrun_launch() {
  run distrun-launch-ddp "$PY" -m distrun.cli.main launch --nproc-per-node 2 \
    --run-dir "$WORK/run" "$REPO/examples/ddp.py" || return
  rm -rf "$HERE/distrun-launch-run" && rm "$WORK/run/env.json" && cp -r "$WORK/run" "$HERE/distrun-launch-run"
  find "$HERE/distrun-launch-run" -type f -exec sed -E -i "s/\b$HOST\b/node01/g" {} +
  echo "capture: distrun-launch-run: $(find "$HERE/distrun-launch-run" -type f | wc -l) files"
}

distrun_demo() { run distrun-demo "$PY" -m distrun.cli.main demo; }

lightning_fit() { run lightning-fit-ddp "$PY" "$HERE/jobs/lightning_fit.py"; }

# `--cpu` picks accelerate's one-process (or mpirun) launcher; `--multi_gpu` is its torchrun
# launcher, and the script's Accelerator(cpu=True) keeps both processes on the CPU (gloo)
# the same job run twice, both runs appended to one log (`>> train.log`, a requeued Slurm job
# with --open-mode=append): every once-per-process line comes twice, from two runs
lightning_rerun() {
  local rc=0 attempt
  mkdir -p "$WORK/rerun"
  for attempt in 1 2; do
    (cd "$WORK/rerun" && timeout -k 10 $LIMIT "$PY" "$HERE/jobs/lightning_fit.py" \
      >>"$WORK/rerun.out" 2>&1) || rc=$?
  done
  keep lightning-fit-ddp-rerun-appended "$rc" "$WORK/rerun.out"
}

accelerate_launch() {
  run accelerate-launch-cpu "$BIN/accelerate" launch --multi_gpu --num_processes 2 \
    --num_machines 1 --mixed_precision no --dynamo_backend no "$HERE/jobs/accelerate_fit.py"
}

# the project's examples, under torchrun (they call distrun.init() first)
deepspeed_torchrun() {
  run deepspeed-torchrun "$BIN/torchrun" --nproc-per-node 2 "$REPO/examples/deepspeed_example.py"
}
mmengine_torchrun() {
  run mmengine-runner-torchrun "$BIN/torchrun" --nproc-per-node 2 \
    "$REPO/examples/mmengine_runner.py"
}

hf_trainer_torchrun() {
  run hf-trainer-torchrun "$BIN/torchrun" --nproc-per-node 2 "$REPO/examples/hf_trainer.py"
}

# the deprecated torch.distributed.launch (it passes --local-rank and prints a FutureWarning
# telling scripts to read os.environ['LOCAL_RANK'] on every run); ddp.py reads the environment
distributed_launch() {
  run distributed-launch-ddp "$PY" -m torch.distributed.launch --nproc_per_node 2 \
    "$REPO/examples/ddp.py"
}

# two torchrun agents as two "nodes" on this machine (c10d rendezvous, one process each):
# each agent's own output, as a multi-node job leaves one log per node
torchrun_two_nodes() {
  local port pids=() rc=0 node
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for node in 0 1; do
    mkdir -p "$WORK/node$node"
    (cd "$WORK/node$node" && LOGLEVEL=INFO timeout -k 10 $LIMIT "$BIN/torchrun" --nnodes 2 \
      --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "localhost:$port" \
      --rdzv-id healthy-two-nodes "$REPO/examples/ddp.py" >"$WORK/node$node.out" 2>&1) &
    pids+=($!)
  done
  for node in 0 1; do wait "${pids[$node]}" || rc=$?; done
  for node in 0 1; do keep "torchrun-two-nodes-node$node" "$rc" "$WORK/node$node.out"; done
}

# Open MPI's mpirun starting 2 processes (as root here, hence --allow-run-as-root)
mpirun_gloo() {
  local port
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port run mpirun-gloo mpirun --allow-run-as-root \
    --oversubscribe -np 2 -x MASTER_ADDR -x MASTER_PORT -x PYTHONPATH \
    "$PY" "$HERE/jobs/mpi_collectives.py"
}

ALL="torchrun_detail torchrun_ddp distributed_launch torchrun_two_nodes distrun_launch distrun_demo lightning_fit lightning_rerun accelerate_launch
deepspeed_torchrun mmengine_torchrun hf_trainer_torchrun mpirun_gloo"
for step in ${*:-$ALL}; do "$step"; done
