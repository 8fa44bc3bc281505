#!/bin/sh
# Made by 'distrun export shell': 2 node(s) x 8 process(es) = world size 16; backend nccl; device cuda (nvidia).
# Node 1 of 2 (node1): ranks 8-15. Run it there; start every node's script.
set -eu
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
exec torchrun --nnodes 2 --node-rank 1 --master-addr node0 --master-port 29500 --nproc-per-node 8 train.py --lr 3e-4 --name 'run one'
