#!/usr/bin/env bash
# Field batch 30 (issue #15, nineteenth session): the U-Net of HF's "Annotated Diffusion Model" post (fixed 128 px
# images, random timesteps, a few no_grad sampling steps every 4 steps; OOM observer), Mask R-CNN in torchvision's
# detection reference (a mask per box, images of random sizes; except handler; earlier batches' mrc runs had no
# masks and failed in calibration), and extractive QA as run_qa.py runs it (BERT-large, dynamic padding to 384,
# eval gathering logits on the GPU; history in a ring, except handler).
source "$(dirname "$0")/lib.sh"
field_begin field30
edge_and_lo ddpm annotated_diffusion.py --dim 64 --image-size 128 --batch 64 --sample-batch 128 --steps 10
edge_and_lo mrc2 tv_detection.py --arch maskrcnn_resnet50_fpn --batch 6 --steps 10
edge_and_lo qa hf_question_answering.py --hidden 1024 --layers 24 --batch 32 --eval-batch 64 --steps 12 --eval-steps 5
field_end field30
