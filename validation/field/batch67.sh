#!/usr/bin/env bash
# Field batch 67 (issue #15, twenty-eighth session): schedules that change the batch's shape on purpose.
# fast.ai-style progressive resizing (ResNet-50, 128 → 224 px in four stages) and YOLO-style multi-scale training
# (a random side between 0.5× and 1.5× of 640 every batch), and the CUDA semantics notes' whole-network graph
# capture with an eager evaluation at a larger batch.
source "$(dirname "$0")/lib.sh"
field_begin field67
edge_and_lo prz progressive_resize.py --batch 192 --sizes 128,160,192,224 --steps-per-size 3
edge_and_lo msd multiscale_dense.py --batch 16 --imgsz 640 --steps 12
edge_and_lo cgw cuda_graph_whole.py --steps 12 --eval-every 4
field_end field67
