#!/usr/bin/env bash
# Field batch 97 (issue #15), the thirty-eighth session: Tacotron 2 at its mid budget, and ELECTRA, FLIP and the
# ConvLSTM between their edge (OOM) and mid (completed) budgets of batches 92-96. One call; predictions before the
# labels.
source "$(dirname "$0")/lib.sh"
field_begin field97
record taco_mid 7.288 tacotron_tts.py
record electra_q 33.0 electra_pretrain.py
record flip_q 29.8 flip_masked_clip.py
record clstm_q 7.75 convlstm_video.py
field_end field97
