#!/usr/bin/env bash
# Field batch 35 (issue #15, twentieth session): a Mixtral-style mixture of experts in a plain loop (tokens
# per expert change every step; OOM observer) and knowledge distillation of a ResNet-50 from a frozen
# ResNet-152 (random sizes, fp16 with GradScaler; except handler); DDP set up after the model and a cached
# dataset filled the card (NCCL's own allocation fails: the user's log only, no label).
source "$(dirname "$0")/lib.sh"
field_begin field35
edge_and_lo moe hf_moe.py --hidden 1024 --layers 8 --experts 8 --batch 8 --max-len 1024 --steps 10
edge_and_lo kd tv_distill.py --batch 128 --steps 12 --sizes 176,224,256
# The model (8 × 64 MiB weights and their biases) and the 1 GiB cache take 1.502 GiB: 3 MiB are left for NCCL.
run_job "$R/ddp_nccl" 1.505 ddp_late_init.py --cache-gib 1
field_end field35
