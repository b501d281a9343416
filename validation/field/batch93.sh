#!/usr/bin/env bash
# Field batch 93 (issue #15), the thirty-eighth session: Tacotron 2 with teacher forcing in a Python loop over the mel
# frames (OOM observer, ring); the HF Trainer with torch_compile=True and group_by_length (except); GraphSAGE with
# neighbour sampling in plain torch, subgraphs of a new size every step (except). One call; predictions
# (predictions-batch92-93.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field93
edge_and_lo taco tacotron_tts.py
edge_and_lo sage graphsage_sampled.py
edge_and_lo hfcc hf_compile_cls.py
field_end field93
