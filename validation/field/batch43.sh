#!/usr/bin/env bash
# Field batch 43 (issue #15, twenty-second session): PPO-style RLHF in a plain loop (a rollout with
# model.generate under no_grad, the frozen reference's log-probs, a clipped-surrogate step with a value head;
# prompts of a random length each step; except handler). Batch 40's captioning job ran 3 steps without history,
# and with history but without checkpointing, in the first call of this batch: its SystemError in run_backward
# comes with history and gradient checkpointing together.
source "$(dirname "$0")/lib.sh"
field_begin field43
edge_and_lo ppo ppo_loop.py --hidden 1024 --layers 12 --batch 16 --gen-len 128 --steps 8
field_end field43
