#!/usr/bin/env bash
# Field batch 89 (issue #15), prepared in the thirty-seventh session: a physics-informed network whose collocation
# set grows by residual-based refinement (second derivatives by create_graph; except handler); a GPT under selective
# activation checkpointing (create_selective_checkpoint_contexts, sequences of changing length, history from step 2
# as a ring; OOM observer); a Graphormer over padded graphs of changing node counts with an N x N x heads distance
# bias and a larger-batch eval (except handler). One call (FIELD_SECONDS=555 JOB_TIMEOUT=150); predictions
# (predictions-batch89.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field89
edge_and_lo pinn pinn_adaptive.py
edge_and_lo sac selective_ckpt_gpt.py
edge_and_lo gfm graph_transformer_dense.py
field_end field89
