#!/usr/bin/env bash
# Field batch 29 (issue #15, eighteenth session): wav2vec 2.0 CTC fine-tuning as the HF blog runs it, without
# gradient checkpointing (batch 28's calibration failed in its recompute): frozen feature encoder, LayerDrop, audio of
# 2-12 s; history from step 2, except handler.
source "$(dirname "$0")/lib.sh"
field_begin field29
edge_and_lo w2v hf_wav2vec2_ctc.py --hidden 1024 --layers 24 --batch 24 --eval-batch 24 --steps 12 --eval-steps 5
field_end field29
