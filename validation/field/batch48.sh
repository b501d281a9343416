#!/usr/bin/env bash
# Field batch 48 (issue #15, twenty-fourth session): supervised fine-tuning of a Gemma-style model (256k vocabulary,
# multi-query attention) under the HF Trainer on packed sequences, gradient checkpointing, fused AdamW, an eval
# batch twice the training one (except handler around trainer.train()).
source "$(dirname "$0")/lib.sh"
field_begin field48
edge_and_lo gem hf_gemma_sft.py --hidden 1024 --layers 8 --batch 2 --eval-batch 4 --steps 10
field_end field48
