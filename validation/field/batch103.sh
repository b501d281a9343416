#!/usr/bin/env bash
# Field batch 103 (issue #15), the thirty-ninth session: where batch 102 completed or failed, closer to the flip:
# the ensemble at 23.6 and 24.8 GiB (OOM at 22.72, completed at 26), PGD at 9.7 GiB (OOM at 9.17, completed at
# 10.39), padding-free at 54.5 GiB (OOM at 51.7; calibration reserved 57.05). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field103
record ens_r 23.6 ensemble_vmap.py
record ens_s 24.8 ensemble_vmap.py
record pgd_q 9.7 pgd_adversarial.py
record pff_q 54.5 hf_padding_free.py
field_end field103
