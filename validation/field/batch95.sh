#!/usr/bin/env bash
# Field batch 95 (issue #15), the thirty-eighth session: a WaveNet vocoder over random crop lengths (except); FLIP,
# CLIP with a random share of image patches dropped per step, history from step 1 (OOM observer). One call;
# predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field95
edge_and_lo wnet wavenet_vocoder.py
edge_and_lo flip flip_masked_clip.py
field_end field95
