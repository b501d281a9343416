#!/usr/bin/env bash
# Field batch 96 (issue #15), the thirty-eighth session: batches 92, 93 and 95's jobs once more at the "mid" budget
# (the mean of their calibration's peak reserved and allocated, computed from those truth.json files), where the
# label is least known in advance. One call; predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field96
record hyena_mid 31.664 hyena_fft_lm.py
record sage_mid 9.646 graphsage_sampled.py
record wnet_mid 7.124 wavenet_vocoder.py
record clstm_mid 8.259 convlstm_video.py
record flip_mid 31.171 flip_masked_clip.py
record electra_mid 40.123 electra_pretrain.py
field_end field96
