#!/usr/bin/env bash
# Field batch 68 (issue #15, twenty-eighth session): round-robin multi-task training (a ResNet-50 trunk shared by
# a 224-px classification head and a 512-px segmentation head, the tasks taking turns step by step).
source "$(dirname "$0")/lib.sh"
field_begin field68
edge_and_lo mta multitask_alternate.py --steps 12
field_end field68
