#!/usr/bin/env bash
# Field batch 81 (issue #15), the thirty-fifth session: two kinds of job not recorded before. A tabular
# FT-Transformer (a token per feature, a validation split scored in large chunks whose logits are kept and
# concatenated; OOM observer) and a DQN whose replay buffer lives on the GPU and grows by torch.cat every
# collection (history from mid-run; except handler): memory that grows through the run, as RL users' buffers do.
# One call (FIELD_SECONDS=555 JOB_TIMEOUT=120); predictions (predictions-batch81-82.md) before the labels.
source "$(dirname "$0")/lib.sh"
field_begin field81
edge_and_lo ftt ft_transformer.py
edge_and_lo dqn dqn_replay.py
field_end field81
