#!/usr/bin/env bash
# Field batch 54 (issue #15, twenty-fifth session): dense retrieval with GradCache (a no-grad pass over the whole
# batch in chunks, then each chunk again with grad against its cached gradient; except handler); FCOS in
# torchvision's detection reference (anchor-free, images of random sizes; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field54
edge_and_lo gcr grad_cache_retrieval.py --hidden 1024 --layers 24 --queries 512 --chunk 64 --steps 10
edge_and_lo fcos tv_detection.py --arch fcos_resnet50_fpn --batch 16 --steps 12
field_end field54
