#!/usr/bin/env bash
# Field batch 34 (issue #15, nineteenth session): RAFT in torchvision's optical-flow reference (raft_large, fixed
# 368 x 496 crops, 12 refinement iterations, the sequence loss; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field34
edge_and_lo raft tv_optical_flow.py --batch 6 --crop 368,496 --iters 12 --steps 10
field_end field34
