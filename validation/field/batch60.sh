#!/usr/bin/env bash
# Field batch 60 (issue #15, twenty-sixth session): batches 56-59's jobs at budgets between those the protocol
# takes (1.02 and 0.92 x the peak allocated), where held-back jobs may fall: timm at 0.965, the transducer at 0.97
# and 1.07 (its lengths vary; its calibration reserved 40.75 GiB for 11.98 allocated), MoCo between its runs.
source "$(dirname "$0")/lib.sh"
field_begin field60
record timm_mid 13.58 timm_train.py --model vit_base_patch16_224 --batch 192 --steps 12
record rnnt_mid 11.62 rnnt_conformer.py --batch 12 --steps 12
record rnnt_hi 12.82 rnnt_conformer.py --batch 12 --steps 12
record moco_hi 24.9 moco_v2.py --arch resnet50 --batch 256 --steps 10
field_end field60
