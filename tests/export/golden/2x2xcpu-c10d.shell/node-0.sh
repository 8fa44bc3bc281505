#!/bin/sh
# Made by 'distrun export shell': 2 node(s) x 2 process(es) = world size 4; backend gloo; device cpu (cpu).
# Node 0 of 2 (node0): ranks 0-1. Run it there; start every node's script.
set -eu
export OMP_NUM_THREADS=4
exec torchrun --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29400 --rdzv-id job7 --nproc-per-node 2 --max-restarts 3 -m pkg.train --data '/data/it'"'"'s here'
