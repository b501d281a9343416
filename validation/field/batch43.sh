#!/usr/bin/env bash
# Field batch 43 (issue #15, twenty-second session): PPO-style RLHF in a plain loop (a rollout with
# model.generate under no_grad, the frozen reference's log-probs, a clipped-surrogate step with a value head;
# prompts of a random length each step; except handler). First, two short runs of batch 40's captioning job
# that tell whether its SystemError in run_backward comes with memory history or without it.
source "$(dirname "$0")/lib.sh"
for probe in "nohist --max-entries 0" "hist-nockpt --checkpointing none"; do
  set -- $probe
  name=$1; shift
  mkdir -p "/tmp/probe-$name" && (cd "/tmp/probe-$name" && timeout 100 python3 "$HERE/jobs/hf_caption.py" --steps 3 \
    --eval-steps 2 "$@" > log 2>&1; echo "probe $name: rc $?"; grep -E "^[A-Za-z]*Error|train_runtime" log | tail -2 \
    | cut -c1-200)
done
field_begin field43
edge_and_lo ppo ppo_loop.py --hidden 1024 --layers 12 --batch 16 --gen-len 128 --steps 8
field_end field43
