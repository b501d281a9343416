#!/usr/bin/env bash
# Field batch 37 (issue #15, twenty-first session): jobs no batch ran. SimCLR (cudnn.benchmark, fp16, the
# 2B x 2B similarity; history from step 2, except handler), a message-passing graph network in plain PyTorch
# (every batch another size; history from step 2, except handler), a DLRM-style recommender (embedding
# tables whose Adam state is made in the first step; OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field37
edge_and_lo simclr simclr.py --arch resnet50 --batch 128 --size 224 --steps 10
edge_and_lo gnn gnn_loop.py --hidden 256 --layers 6 --graphs 32 --max-nodes 2000 --degree 8 --steps 14
edge_and_lo dlrm dlrm_loop.py --tables 8 --rows 1000000 --dim 128 --bag 16 --batch 16384 --steps 8
field_end field37
