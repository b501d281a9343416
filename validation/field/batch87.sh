#!/usr/bin/env bash
# Field batch 87 (issue #15), the thirty-sixth session: quantization-aware training of a ResNet-50 in FX graph mode
# (fake quantizers on every activation, observers off and BatchNorm frozen mid-run, an eval; except handler); a
# Transformer-XL whose per-layer memories grow segment by segment to 2,048 tokens (a ring of 15,000 entries; OOM
# observer); VideoMAE video classification with the HF Trainer (gradient checkpointing, eval with compute_metrics;
# except handler). One call (FIELD_SECONDS=555 JOB_TIMEOUT=150); predictions (predictions-batch87.md) before the
# labels.
source "$(dirname "$0")/lib.sh"
field_begin field87
edge_and_lo qat qat_resnet_fx.py
edge_and_lo txl transformer_xl_mems.py
edge_and_lo vmae hf_videomae_cls.py
field_end field87
