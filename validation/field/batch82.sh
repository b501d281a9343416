#!/usr/bin/env bash
# Field batch 82 (issue #15), the thirty-fifth session: Cluster-GCN in plain torch (each batch a random set of
# clusters of lognormal sizes: its node and edge counts, and so its memory, change every step; except handler) and
# torchvision's Swin-V2 recipe (CutMix/MixUp, channels_last, cudnn.benchmark, an EMA evaluated at a larger
# resolution and batch; history from mid-run as a ring; OOM observer). One call (FIELD_SECONDS=555
# JOB_TIMEOUT=120); predictions (predictions-batch81-82.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field82
edge_and_lo cgcn cluster_gcn.py
edge_and_lo swcm swin_cutmix.py
field_end field82
