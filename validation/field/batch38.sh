#!/usr/bin/env bash
# Field batch 38 (issue #15, twenty-first session): batch 37's jobs at other shapes and budgets. The graph
# network with more, smaller graphs and history from step 4; SimCLR on a ResNet-101; the recommender at 0.985
# of its peak allocated (1.02 completed in batch 37).
source "$(dirname "$0")/lib.sh"
field_begin field38
edge_and_lo gnn2 gnn_loop.py --hidden 256 --layers 8 --graphs 48 --max-nodes 1500 --degree 6 --steps 16 \
  --history-from-step 4
edge_and_lo simclr2 simclr.py --arch resnet101 --batch 96 --size 224 --steps 10 --history-from-step 3
calibrate dlrm2_cal dlrm_loop.py --tables 12 --rows 600000 --dim 128 --bag 24 --batch 16384 --steps 8
calibrated dlrm2_cal && record dlrm2_edge "$(budget dlrm2_cal max_memory_allocated 0.985)" dlrm_loop.py \
  --tables 12 --rows 600000 --dim 128 --bag 24 --batch 16384 --steps 8
field_end field38
