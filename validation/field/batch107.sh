#!/usr/bin/env bash
# Field batch 107 (issue #15), the thirty-ninth session: two jobs of kinds the field set lacks, never run before.
# A HiFi-GAN vocoder (multi-period and multi-scale discriminators, feature matching, mel L1; fixed crops; OOM
# observer) and a Glow normalizing flow (actnorm, invertible 1x1 convolutions with slogdet, affine couplings; history
# from step 1; except handler). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field107
edge_and_lo hifi hifigan_vocoder.py
edge_and_lo glow glow_flow.py
field_end field107
