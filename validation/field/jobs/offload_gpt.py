"""GPT-2 pretraining in a plain loop with activations offloaded to the CPU, as PyTorch's autograd docs show
(torch.autograd.graph.save_on_cpu(pin_memory=True) around the forward: each saved tensor goes to pinned host memory
and comes back to the GPU in the backward). GPT2LMHeadModel from config (random init: no download), fp16 autocast
with a GradScaler, AdamW, micro-batches of a random sequence length, gradient accumulation over --ga micro-steps.

History from --history-from-step (a mid-run start, ring of --max-entries); the snapshot is dumped in the except
handler.
"""
import argparse, random
import torch
from transformers import GPT2Config, GPT2LMHeadModel

p = argparse.ArgumentParser()
p.add_argument("--n-embd", type=int, default=1280)
p.add_argument("--n-layer", type=int, default=24)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--min-len", type=int, default=512)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--history-from-step", type=int, default=1)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

model = GPT2LMHeadModel(GPT2Config(n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_embd // 64,
                                   n_positions=args.max_len, use_cache=False)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
scaler = torch.amp.GradScaler("cuda")
rng = random.Random(0)
try:
    for step in range(args.steps):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        for micro in range(args.ga):
            ids = torch.randint(0, 50257, (args.batch, rng.randrange(args.min_len, args.max_len + 1)), device="cuda")
            with torch.autograd.graph.save_on_cpu(pin_memory=True), torch.autocast("cuda", dtype=torch.float16):
                loss = model(input_ids=ids, labels=ids).loss / args.ga
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item() * args.ga:.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
