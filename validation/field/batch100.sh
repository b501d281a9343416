#!/usr/bin/env bash
# Field batch 100 (issue #15), the thirty-ninth session: two jobs of kinds the field set lacks, never run before.
# PGD adversarial training of a ResNet-50 (attack iterations of forward + input gradient inside each step; OOM
# observer) and an ensemble of ConvNets trained in one vmapped pass with torch.func (history from step 2; except
# handler). Predictions before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field100
edge_and_lo pgd pgd_adversarial.py
edge_and_lo ens ensemble_vmap.py
field_end field100
