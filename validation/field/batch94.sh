#!/usr/bin/env bash
# Field batch 94 (issue #15), the thirty-eighth session: the HF Trainer with torch_compile=True again (batch 93's run
# stopped: transformers 5 has no group_by_length argument), and skip-gram word2vec with sparse embeddings under
# SparseAdam, whose gradients change size every step (except). One call; predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field94
edge_and_lo sgns sparse_skipgram.py
edge_and_lo hfcc hf_compile_cls.py
field_end field94
