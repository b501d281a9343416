#!/usr/bin/env bash
# Field batch 77 (issue #15), the thirty-fourth session: masked-LM training of a protein language model (ESM-2's
# architecture, 24 layers × 1,280) in an Accelerate loop with gradient accumulation and bf16, protein lengths up to
# 1,024; history from micro-step 2, dump by the OOM observer. Not trialled: the calibration is the trial. One call
# (FIELD_SECONDS=450 JOB_TIMEOUT=110); predictions (predictions-batch75-77.md) before the labels are opened.
source "$(dirname "$0")/lib.sh"
field_begin field77
edge_and_lo esm esm_mlm_accelerate.py
field_end field77
