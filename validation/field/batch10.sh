#!/usr/bin/env bash
# Field batch 10 (issue #15, twelfth session): jobs no rule was written on, recorded before any change of the
# session: torchvision's detection reference (Faster R-CNN, images of random sizes, AMP; except handler) and
# the classification recipe on Swin-T (window attention, multi-scale).
source "$(dirname "$0")/lib.sh"
field_begin field10
edge_and_lo det tv_detection.py --batch 8 --steps 10
edge_and_lo swin tv_resnet.py --arch swin_t --batch 128 --sizes 192,224,256 --steps 10
field_end field10
