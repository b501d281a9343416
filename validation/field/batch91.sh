#!/usr/bin/env bash
# Field batch 91 (issue #15), the thirty-seventh session: a text classifier on nn.TransformerEncoder whose eval under
# inference_mode runs the nested-tensor fast path on a larger batch (except handler); a segmentation net of deformable
# convolutions (torchvision.ops.deform_conv2d) under multi-scale training, history from step 3 (OOM observer). One
# call; predictions (predictions-batch91.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field91
edge_and_lo nenc nested_encoder_cls.py
edge_and_lo dcn deform_conv_seg.py
field_end field91
