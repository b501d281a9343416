#!/usr/bin/env bash
# Field batch 76 (issue #15), the thirty-fourth session: a pairwise reward model as TRL's RewardTrainer trains it
# (a Trainer subclass with its own compute_loss; chosen and rejected in one padded batch; gradient checkpointing;
# history from step 3 by a callback) and long-document classification with ModernBERT (up to 8,192 tokens, SDPA with
# its local-attention masks; history from the start). Not trialled: the calibrations are the trial. One call
# (FIELD_SECONDS=555 JOB_TIMEOUT=120); predictions (predictions-batch75-76.md) before the labels are opened.
source "$(dirname "$0")/lib.sh"
field_begin field76
edge_and_lo rwm hf_reward_model.py
edge_and_lo mbc hf_modernbert_cls.py
field_end field76
