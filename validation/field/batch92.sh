#!/usr/bin/env bash
# Field batch 92 (issue #15), the thirty-eighth session: a long-convolution LM whose FFT filters grow with a
# sequence-length warmup (OOM observer, ring); ELECTRA pre-training, generator and discriminator, history from step 2
# (except); a ConvLSTM video forecaster over a random number of context frames (except). One call; predictions
# (predictions-batch92-93.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field92
edge_and_lo hyena hyena_fft_lm.py
edge_and_lo electra electra_pretrain.py
edge_and_lo clstm convlstm_video.py
field_end field92
