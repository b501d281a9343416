#!/usr/bin/env bash
# Field batch 75 (issue #15), the thirty-fourth session: kinds the field set lacks. A GPT trained with Muon for the
# blocks' matrices and AdamW for the rest under a batch-size warm-up (the batch grows every step, so each OOM comes
# at a batch no earlier step had; history from step 2, dump by the OOM observer), and a causal-LM distillation with
# a frozen bf16 teacher and a fp32 KL on full-vocabulary (128,256) soft targets (variable lengths, history from the
# start, dump in the except handler). Not trialled before: the calibration runs are the trial. One device call
# (FIELD_SECONDS=555 JOB_TIMEOUT=120); predictions (predictions-batch75-77.md) before the labels are opened. Run
# first as `kd` (batch 35 has a `kd`): its recordings are kept as lkd_edge and lkd_lo.
source "$(dirname "$0")/lib.sh"
field_begin field75
edge_and_lo mrm muon_rampup.py
edge_and_lo lkd llm_distill.py
field_end field75
