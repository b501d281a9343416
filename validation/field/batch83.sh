#!/usr/bin/env bash
# Field batch 83 (issue #15), the thirty-fifth session: a convolutional VAE grown from the PyTorch examples' (a
# test pass under no_grad at a larger batch and save_image every epoch; except handler) and Qwen2-architecture SFT
# with the HF Trainer (prompt labels -100, a 151,936-token vocabulary, gradient checkpointing, fused AdamW,
# torch_empty_cache_steps; OOM observer). One call (FIELD_SECONDS=555 JOB_TIMEOUT=150); predictions
# (predictions-batch83.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field83
edge_and_lo vae vae_conv.py
edge_and_lo qsft hf_qwen_sft.py
field_end field83
