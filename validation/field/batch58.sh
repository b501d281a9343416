#!/usr/bin/env bash
# Field batch 58 (issue #15, twenty-sixth session): the timm library's own training pieces (create_loader with its
# side-stream prefetcher, Mixup/CutMix, NativeScaler, ModelEmaV3; a ViT-B/16; except handler) and a Conformer
# transducer for speech (the B x T x (U+1) x V joint of RNN-T, utterances of random length; except handler).
source "$(dirname "$0")/lib.sh"
field_begin field58
edge_and_lo timm timm_train.py --model vit_base_patch16_224 --batch 192 --steps 12
edge_and_lo rnnt rnnt_conformer.py --batch 32 --steps 12
field_end field58
