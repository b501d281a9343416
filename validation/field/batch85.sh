#!/usr/bin/env bash
# Field batch 85 (issue #15), the thirty-fifth session, recorded after the rule on the step before's gradients was
# made on batch 84: a CRNN text recogniser with a cuDNN LSTM and CTC over lines of changing width (except handler)
# and a Perceiver IO masked-byte model over inputs of up to 16,384 bytes (history from step 2 as a ring; OOM
# observer). One call (FIELD_SECONDS=555 JOB_TIMEOUT=150); predictions (predictions-batch85.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field85
edge_and_lo crnn crnn_ctc.py
edge_and_lo pio perceiver_bytes.py
field_end field85
