#!/usr/bin/env bash
# Field batch 59 (issue #15, twenty-sixth session): the Conformer transducer at batch 12 (batch 58's 32 put more than
# 2^31 logits in the joint, past what torchaudio's rnnt_loss indexes), and timm_lo again (batch 58's rerun found the
# card still held by the failed run's DataLoader workers; lib.sh now waits for them).
source "$(dirname "$0")/lib.sh"
field_begin field59
record timm_lo 12.941 timm_train.py --model vit_base_patch16_224 --batch 192 --steps 12
edge_and_lo rnnt rnnt_conformer.py --batch 12 --steps 12
field_end field59
