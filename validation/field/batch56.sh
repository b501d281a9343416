#!/usr/bin/env bash
# Field batch 56 (issue #15, twenty-sixth session): jobs that allocate on a second CUDA stream or keep a second
# model: timm's / apex's prefetcher (the next batch copied, normalized and erased on a side stream, record_stream()
# on the main one; EfficientNetV2-S, MixUp, bf16, an EMA; except handler) and MoCo v2 (a momentum key encoder
# updated out of place each step, a 65,536-key queue; fp32; OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field56
edge_and_lo tpf timm_prefetch.py --arch efficientnet_v2_s --batch 128 --size 288 --steps 12
edge_and_lo moco moco_v2.py --arch resnet50 --batch 256 --steps 10
field_end field56
