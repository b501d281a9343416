#!/usr/bin/env bash
# Field batch 79 (issue #15), the thirty-fourth session: batch 78's Fourier neural operator with its eval the peak
# (resolution 640, batch 48, under torch.no_grad: the first eval at step 8 is a pass the training steps never ran).
# One call (FIELD_SECONDS=300 JOB_TIMEOUT=90); predictions (predictions-batch78-79.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field79
edge_and_lo fnoe fno_multires.py --eval-res 640 --eval-batch 48
field_end field79
