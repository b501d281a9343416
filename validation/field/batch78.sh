#!/usr/bin/env bash
# Field batch 78 (issue #15), the thirty-fourth session: a Fourier neural operator (scientific ML: spectral
# convolutions through torch.fft, cuFFT's plans and workspaces) trained at a resolution drawn per batch from 128 to 320
# with an eval at 384 every 8 steps; history from the start; except handler. Not trialled: the calibration is the
# trial. One call (FIELD_SECONDS=420 JOB_TIMEOUT=100); predictions (predictions-batch78.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field78
edge_and_lo fno fno_multires.py
field_end field78
