#!/usr/bin/env bash
# Field batch 51 (issue #15, twenty-fourth session): a BLOOM-style causal LM (ALiBi biases) under the HF Trainer with
# dynamic padding, accumulation and eval (OOM observer); DGCNN point-cloud classification (a kNN graph rebuilt in
# feature space at every layer, clouds of 1,024-4,096 points; history from step 1, except handler).
source "$(dirname "$0")/lib.sh"
field_begin field51
edge_and_lo blm hf_bloom_alibi.py --hidden 1536 --layers 12 --batch 8 --steps 10
edge_and_lo dg dgcnn_points.py --batch 32 --k 20 --steps 16
field_end field51
