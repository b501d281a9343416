#!/usr/bin/env bash
# Field batch 108 (issue #15), the thirty-ninth session: batch 107's jobs between their calibrations' peaks allocated
# and reserved ("mid": HiFi-GAN 17.52 GiB, Glow 6.21 GiB), both OOM at their edge. Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field108
record hifi_mid 17.52 hifigan_vocoder.py
record glow_mid 6.21 glow_flow.py
field_end field108
