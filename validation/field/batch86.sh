#!/usr/bin/env bash
# Field batch 86 (issue #15), the thirty-sixth session: an ODE-Net classifier integrated by a hand-written adaptive
# Dormand-Prince solver and back-propagated through its steps (memory follows the solver's function evaluations;
# except handler), and ComplEx knowledge-graph completion with 1-N scoring (a batch x 400,000-entity score matrix,
# pairs per batch changing, a filtered evaluation under no_grad; history from step 3, OOM observer). One call
# (FIELD_SECONDS=555 JOB_TIMEOUT=150); predictions (predictions-batch86.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field86
edge_and_lo node neural_ode_dopri.py
edge_and_lo kge kge_complex_1n.py
field_end field86
