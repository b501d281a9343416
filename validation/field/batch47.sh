#!/usr/bin/env bash
# Field batch 47 (issue #15, twenty-fourth session): ConvNeXt as torchvision's reference trains it with an EMA of the
# weights, MixUp/CutMix and progressive resizing (the image size grows every 4 steps; except handler); T5 under
# HF Accelerate with Adafactor, inputs and targets whose lengths vary apart, history from step 3 (except handler).
source "$(dirname "$0")/lib.sh"
field_begin field47
edge_and_lo cnxe tv_convnext_ema.py --arch convnext_tiny --batch 96 --steps 16
edge_and_lo t5 t5_adafactor.py --d-model 1024 --layers 12 --batch 16 --steps 16
field_end field47
