#!/usr/bin/env bash
# Field batch 88 (issue #15), prepared in the thirty-sixth session: a StyleGAN2-style GAN with lazy R1
# regularisation (autograd.grad with create_graph every 4th step, the first included; except handler) and a 3D
# U-Net trained on 96^3 patches whose evaluation is a sliding-window inference over whole volumes of changing extent
# (a full-volume fp32 accumulator on the GPU; OOM observer). One call (FIELD_SECONDS=555 JOB_TIMEOUT=150);
# predictions (predictions-batch88.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field88
edge_and_lo sg2 stylegan_lazy_r1.py
edge_and_lo swseg sliding_window_seg3d.py
field_end field88
