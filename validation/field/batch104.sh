#!/usr/bin/env bash
# Field batch 104 (issue #15), the thirty-ninth session: two jobs of kinds the field set lacks, never run before.
# An ESRGAN-style super-resolution GAN (RRDB generator, VGG discriminator, frozen VGG-19 perceptual loss; crop size
# drawn per batch; except handler) and Conv-TasNet speech separation (utterances of 2-6 s padded per batch, PIT
# SI-SNR, a no-grad validation on 8 s; ring; OOM observer). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field104
edge_and_lo esr esrgan_sr.py
edge_and_lo tasnet conv_tasnet.py
field_end field104
