"""Wordings added in session 17 by helper av (issue 12): short pastes with no error line for the
port, Slurm-request and launcher categories, from the printing sources.

Each case is a short log as a user would paste it; the test asserts the verdict they read.
"""

from __future__ import annotations

from tests.diagnose.wording import NOISE, Case, Neighbour, wording_tests

PORT = "address-in-use"
SLURM = "slurm-allocation-mismatch"
LAUNCHER = "no-launcher"

CASES: dict[str, Case] = {
    # lsof -i :29500: the holder of torch's default master port, pasted without the error
    "lsof shows the master port held": (
        "$ lsof -i :29500\n"
        "COMMAND   PID USER   FD   TYPE   DEVICE SIZE/OFF NODE NAME\n"
        "python  48211 alex    3u  IPv4 1893421      0t0  TCP *:29500 (LISTEN)\n",
        PORT, "low", None),
    # ss -ltnp (iproute2): the same, and the c10d rendezvous backend's default port
    "ss shows the rendezvous port held": (
        "State  Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
        "LISTEN 0      4096         0.0.0.0:29400      0.0.0.0:*    "
        "users:((\"torchrun\",pid=9120,fd=3))\n",
        PORT, "low", None),
    # netstat -tlnp (net-tools)
    "netstat shows the master port held": (
        "tcp        0      0 0.0.0.0:29500           0.0.0.0:*               LISTEN      "
        "30017/python\n",
        PORT, "low", None),
    # squeue: a job pending because it asks for more nodes than its partition allows
    "squeue pending on the partition's node limit": (
        "JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        "  812       gpu   train.sh   alex PD       0:00      4 (PartitionNodeLimit)\n",
        SLURM, "low", None),
    # scontrol show job: constraints no node satisfies
    "scontrol reason bad constraints": (
        "JobId=812 JobName=train.sh\n   JobState=PENDING Reason=BadConstraints Dependency=(null)\n",
        SLURM, "low", None),
    # squeue: the QOS caps GPUs per job (the per-user form was there before)
    "squeue pending on the qos gres per job": (
        "  813       gpu   train.sh   alex PD       0:00      2 (QOSMaxGRESPerJob)\n",
        SLURM, "low", None),
    # transformers examples: one process sees four GPUs and is not distributed
    "hf example script without a launcher": (
        "11/24/2026 10:02:11 - WARNING - __main__ - Process rank: -1, device: cuda:0, n_gpu: 4, "
        "distributed training: False, 16-bits training: True\n" + NOISE,
        LAUNCHER, "low", None),
}

NEIGHBOURS: dict[str, Neighbour] = {
    # a single-GPU run of the same script is no launcher problem
    "hf example script on one gpu": (
        "Process rank: -1, device: cuda:0, n_gpu: 1, distributed training: False, "
        "16-bits training: False\n" + NOISE, None),
    # a process torchrun started prints the same line with distributed training on
    "hf example script under torchrun": (
        "Process rank: 0, device: cuda:0, n_gpu: 1, distributed training: True, "
        "16-bits training: False\n" + NOISE, None),
    # a port other than torch's defaults held by some service says nothing about the job
    "ss shows another port held": (
        "LISTEN 0      4096         0.0.0.0:8888      0.0.0.0:*    "
        "users:((\"jupyter\",pid=711,fd=5))\n", None),
    # the listening master in a rendezvous that timed out stays the rendezvous's
    "master listening while a worker timed out": (
        "LISTEN 0      4096         0.0.0.0:29500      0.0.0.0:*\n"
        "[E socket.cpp:793] [c10d] The client socket has timed out after 60s while trying to "
        "connect to (10.0.0.1, 29500).\n", "rendezvous-timeout"),
    # a job pending for free resources (it fits, the nodes are busy) is no mismatch
    "squeue pending on resources": (
        "  814       gpu   train.sh   alex PD       0:00      2 (Resources)\n", None),
    # pending on the partition's time limit is the time request, not the devices or tasks
    "squeue pending on the partition's time limit": (
        "  815       gpu   train.sh   alex PD       0:00      2 (PartitionTimeLimit)\n", None),
}


test_wording_names_the_rule, test_neighbour_is_not_taken = wording_tests(CASES, NEIGHBOURS)
