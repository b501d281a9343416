#!/usr/bin/env bash
# Field batch 101 (issue #15), the thirty-ninth session: padding-free training with the HF Trainer
# (DataCollatorWithFlattening: a step's documents in one row, their tokens varying per step; a Llama from config;
# except handler around trainer.train()), never run before; and batch 100's vmapped ensemble at 8 members of 128
# images (16 of 256 ran out of the whole H100 in its calibration). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field101
edge_and_lo ens ensemble_vmap.py
edge_and_lo pff hf_padding_free.py
field_end field101
