#!/usr/bin/env bash
# Field batch 5: what batch 4 had no time left for: torchvision DeepLabV3 (varying sizes, eval) at the
# edge, the nn.Transformer tutorial (OOM observer) clearly under its peak.
source "$(dirname "$0")/lib.sh"
field_begin field5
SEG=(tv_segmentation.py --steps 8 --eval-every 3)
TUT=(tutorial_transformer.py --steps 10 --eval-every 4)
calibrate seg_cal "${SEG[@]}"
record seg_edge "$(budget seg_cal edge 1.03)" "${SEG[@]}"
calibrate tut_cal "${TUT[@]}"
record tut_lo "$(budget tut_cal max_memory_allocated 0.9)" "${TUT[@]}"
field_end field5
