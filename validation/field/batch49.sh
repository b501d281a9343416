#!/usr/bin/env bash
# Field batch 49 (issue #15, twenty-fourth session): DeBERTa-v2 sequence classification under the HF Trainer
# (disentangled attention, lengths up to 1,024 padded per batch, eval; OOM observer); a 3D U-Net trained as
# nnU-Net-style loops do (Conv3d, instance norm, patches of varying shape, fp16 + GradScaler, gradient clipping,
# cudnn.benchmark; OOM observer).
source "$(dirname "$0")/lib.sh"
field_begin field49
edge_and_lo deb hf_deberta_cls.py --hidden 1024 --layers 12 --batch 16 --steps 12
edge_and_lo u3d unet3d_seg.py --width 32 --batch 2 --steps 16
field_end field49
