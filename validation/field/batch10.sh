#!/usr/bin/env bash
# Field batch 10 (issue #15, twelfth session): jobs no rule was written on, recorded before any change of
# the session: torchvision's detection reference (Faster R-CNN, images of random sizes, AMP; except
# handler) and the classification recipe on Swin-T (window attention, multi-scale). A job whose
# calibration did not complete is not recorded.
source "$(dirname "$0")/lib.sh"
field_begin field10
DET=(tv_detection.py --batch 8 --steps 10)
SWIN=(tv_resnet.py --arch swin_t --batch 128 --sizes 192,224,256 --steps 10)
calibrate det_cal "${DET[@]}"
if calibrated det_cal; then
  record det_edge "$(budget det_cal edge 1.02)" "${DET[@]}"
  record det_lo "$(budget det_cal max_memory_allocated 0.92)" "${DET[@]}"
fi
calibrate swin_cal "${SWIN[@]}"
if calibrated swin_cal; then
  record swin_edge "$(budget swin_cal edge 1.02)" "${SWIN[@]}"
  record swin_lo "$(budget swin_cal max_memory_allocated 0.92)" "${SWIN[@]}"
fi
field_end field10
