#!/usr/bin/env bash
# Field batch 36 (issue #15, twentieth session): DPO as TRL's DPOTrainer computes it (a policy and a frozen
# reference Qwen2, chosen and rejected rows concatenated, fp32 log-softmax; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field36
edge_and_lo dpo dpo_loop.py --hidden 1024 --layers 12 --batch 4 --max-len 1024 --steps 10
field_end field36
