#!/bin/sh
# Made by 'distrun export shell': 1 node(s) x 8 process(es) = world size 8; backend nccl; device cuda (amd).
# Node 0 of 1 (node0): ranks 0-7. Run it there; start every node's script.
set -eu
export HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
exec torchrun --standalone --nproc-per-node 8 train.py
