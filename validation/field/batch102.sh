#!/usr/bin/env bash
# Field batch 102 (issue #15), the thirty-ninth session: batches 100-101's jobs between their peak allocated and
# peak reserved (the calibrations' "mid": PGD 10.39 GiB, the ensemble 30.4 GiB, padding-free 51.7 GiB), and the
# ensemble at 26 GiB, where each calibration's cache held far more than its tensors. Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field102
record pgd_mid 10.39 pgd_adversarial.py
record ens_mid 30.4 ensemble_vmap.py
record ens_q 26.0 ensemble_vmap.py
record pff_mid 51.7 hf_padding_free.py
field_end field102
