"""Sequence-length warm-up (curriculum) as DeepSpeed's data-efficiency docs and GPT pre-training papers (Li et al.,
"The Stability-Efficiency Dilemma") describe it: the training sequences are truncated to a length that grows
linearly from --start-len to --max-len over --warmup-steps steps (in multiples of 64), then stays; a plain HF Llama
loop with bf16 autocast, AdamW (foreach), gradient clipping. History from the start; the snapshot is dumped in the
except handler.
"""
import argparse
import torch
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--start-len", type=int, default=256)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--warmup-steps", type=int, default=8)
p.add_argument("--steps", type=int, default=11)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                  intermediate_size=args.hidden * 8 // 3 // 64 * 64, vocab_size=32000, max_position_embeddings=4096)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = LlamaForCausalLM(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
data = torch.randint(0, cfg.vocab_size, (args.batch * args.steps, args.max_len))
try:
    for step in range(args.steps):
        grown = args.start_len + (args.max_len - args.start_len) * min(1.0, step / args.warmup_steps)
        length = int(grown) // 64 * 64
        ids = data[step * args.batch:(step + 1) * args.batch, :length].cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} len {length} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
