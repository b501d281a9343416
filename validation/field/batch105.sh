#!/usr/bin/env bash
# Field batch 105 (issue #15), the thirty-ninth session: batch 104's Conv-TasNet again (its calibration stopped on a
# batch whose longest utterance was no whole number of encoder strides: the job now pads to one, as recipes do), and
# the super-resolution GAN between its peaks allocated and reserved (6.66 GiB). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field105
edge_and_lo tasnet conv_tasnet.py
record esr_mid 6.66 esrgan_sr.py
field_end field105
