#!/usr/bin/env bash
# Field batch 99 (issue #15), the thirty-eighth session: batch 98's full-batch GAT at two budgets between its lo
# (OOM) and edge (completed), 27.35 and 27.2 GiB (its calibration's peak allocated: 27.13 GiB). Predictions before the
# labels.
source "$(dirname "$0")/lib.sh"
field_begin field99
record gat_q 27.35 gat_fullbatch.py
record gat_r 27.2 gat_fullbatch.py
field_end field99
