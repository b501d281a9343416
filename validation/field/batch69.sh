#!/usr/bin/env bash
# Field batch 69 (issue #15, twenty-eighth session): WGAN-GP (five critic steps per generator step, each critic
# step a double backward through the gradient penalty), and batch 67's multi-scale training with cudnn.benchmark
# on, as YOLOv5 sets it (every new size is benchmarked).
source "$(dirname "$0")/lib.sh"
field_begin field69
edge_and_lo wgp wgan_gp.py --batch 64 --size 128 --n-critic 5 --gen-steps 3
edge_and_lo msb multiscale_dense.py --batch 16 --imgsz 640 --steps 12 --benchmark
field_end field69
