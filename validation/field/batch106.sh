#!/usr/bin/env bash
# Field batch 106 (issue #15), the thirty-ninth session: Conv-TasNet above its edge (24.44 GiB, OOM), where its
# calibration's cache (67.2 GiB reserved for 23.96 allocated) leaves room for fragmentation to decide: 25.5, 27 and
# 30 GiB; the super-resolution GAN at 6.6 GiB (OOM at 6.53, completed at 6.66). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field106
record tasnet_q 25.5 conv_tasnet.py
record tasnet_r 27 conv_tasnet.py
record tasnet_s 30 conv_tasnet.py
record esr_q 6.6 esrgan_sr.py
field_end field106
