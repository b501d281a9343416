#!/usr/bin/env bash
# Field batch 39 (issue #15, twenty-first session): jobs no batch ran, with history from the start. DINO's
# multi-crop self-distillation (a ResNet-50 run once per crop resolution, an EMA teacher, 65536 prototypes;
# except handler) and PatchTST forecasting with the HF Trainer (channel-independent patches, eval every 4 steps
# with a larger batch; OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field39
edge_and_lo dino dino_multicrop.py --arch resnet50 --batch 64 --steps 10
edge_and_lo tst hf_patchtst.py --channels 321 --context 1024 --d-model 128 --layers 4 --batch 8 --eval-batch 16 \
  --steps 10 --eval-steps 4
field_end field39
