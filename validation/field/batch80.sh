#!/usr/bin/env bash
# Field batch 80 (issue #15), the thirty-fourth session: a sequence-length warm-up (256 to 2,048 tokens over 8 steps,
# then 2,048), a plain HF Llama loop; history from the start; except handler (batch 53's slw_* doubles its length
# every few steps: not at every step). A warm-up of another dimension than batch 75's batch size, run after the
# batches_grow rule was made on that batch's mrm_lo: it may leave a step undetermined, never decide it wrong. One
# call (FIELD_SECONDS=220 JOB_TIMEOUT=60); predictions (predictions-batch80.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field80
edge_and_lo slin seqlen_warmup.py
field_end field80
