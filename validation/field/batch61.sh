#!/usr/bin/env bash
# Field batch 61 (issue #15, twenty-sixth session): GPT-2 fine-tuning under Lightning Fabric (bf16-mixed, gradient
# accumulation under no_backward_sync, dynamic padding; history from step 1; OOM observer) and GPT pretraining on
# packed documents with the compiled FlexAttention and a document-causal BlockMask per batch (except handler).
source "$(dirname "$0")/lib.sh"
field_begin field61
edge_and_lo fab fabric_gpt.py --layers 24 --hidden 1024 --batch 8 --max-len 1024 --steps 12
edge_and_lo flex flex_gpt.py --layers 12 --hidden 1024 --batch 8 --seq 4096 --steps 10
field_end field61
