#!/usr/bin/env bash
# Field batch 98 (issue #15), the thirty-eighth session: a full-batch graph attention network in plain torch (the
# same whole graph every step; edge softmax by scatter_reduce; except handler). One short call with what device time
# was left; predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field98
edge_and_lo gat gat_fullbatch.py
field_end field98
