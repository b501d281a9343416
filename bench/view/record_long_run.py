#!/usr/bin/env python3
"""Records a long training run with allocation history on, for `fragscope view` at scale.

A small HF Llama (hidden 256, 24 layers) in bf16 autocast with AdamW, variable sequence lengths
(log-normal, seed 7), history from the first step with python stacks in a ring far larger than
the run, until --seconds pass or --allocations mallocs were made; then one batch far beyond the
card (2048 x 4096 tokens) ends it with a real OOM, and the snapshot is dumped in the except
handler, as PyTorch's docs suggest. docs/PERFORMANCE.md (fragscope view) used:
    python3 record_long_run.py --seconds 90 --allocations 5000000 --out s.pickle
(669 steps, 2.4 M allocations, 7.3 M trace events, a 635 MB pickle, 32 MB as .zst or .xz).
"""
import argparse
import os
import random
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=90)
p.add_argument("--allocations", type=int, default=5_000_000)
p.add_argument("--out", default="snapshot.pickle")
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=60_000_000, stacks="python")
model = LlamaForCausalLM(LlamaConfig(hidden_size=256, num_hidden_layers=24, num_attention_heads=4,
                                     intermediate_size=704, vocab_size=32000, max_position_embeddings=4096)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
rng = random.Random(7)


def step(batch, length):
    ids = torch.randint(0, 32000, (batch, length), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def allocations():
    return torch.cuda.memory_stats()["allocation.all.allocated"]


start = time.time()
steps = 0
try:
    while time.time() - start < args.seconds and allocations() < args.allocations:
        step(4, max(64, min(3072, int(rng.lognormvariate(6.3, 0.7)) // 64 * 64)))
        steps += 1
        if steps % 100 == 0:
            print(steps, round(time.time() - start, 1), allocations(), flush=True)
    torch.cuda.synchronize()
    print("loop", steps, time.time() - start, flush=True)
    step(2048, 4096)
except torch.OutOfMemoryError as e:
    print("oom", str(e)[:300], flush=True)
dump = time.time()
torch.cuda.memory._dump_snapshot(args.out)
print("dump", time.time() - dump, os.path.getsize(args.out), flush=True)
