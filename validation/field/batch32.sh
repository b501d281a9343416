#!/usr/bin/env bash
# Field batch 32 (issue #15, nineteenth session): Keypoint R-CNN in torchvision's detection reference (17 keypoints
# per box, images of random sizes; except handler), and RoBERTa-large sentence-pair classification as run_glue.py
# runs it (dynamic padding, fp16, gradient checkpointing, eval with compute_metrics; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field32
edge_and_lo kpr tv_detection.py --arch keypointrcnn_resnet50_fpn --batch 6 --steps 10
edge_and_lo glue hf_text_cls.py --ckpt --batch 256 --eval-batch 512 --max-len 256 --steps 12 --eval-steps 5
field_end field32
