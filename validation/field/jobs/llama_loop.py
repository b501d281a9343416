"""A plain HF Llama training loop of the kind found in blog posts: AdamW, bf16 autocast, variable-length
batches, optional torch.cuda.empty_cache() every --empty-cache-every steps ("to reduce fragmentation"),
optional torch.compile. History from the start (ring of --max-entries); dump in the except handler.
"""
import argparse, random
import torch
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1536)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-len", type=int, default=3072)
p.add_argument("--empty-cache-every", type=int, default=0)
p.add_argument("--compile", default="", help="'' | default | dynamic | reduce-overhead")
p.add_argument("--fixed-len", type=int, default=0)
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--history-from-step", type=int, default=0)
p.add_argument("--dump-end", action="store_true", help="dump snapshot.pickle when the run ends")
args = p.parse_args()

cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                  intermediate_size=args.hidden * 8 // 3 // 64 * 64, vocab_size=32000, max_position_embeddings=8192)
if args.history_from_step == 0:
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = LlamaForCausalLM(cfg).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
fwd = model
if args.compile == "default":
    fwd = torch.compile(model)
elif args.compile == "dynamic":
    fwd = torch.compile(model, dynamic=True)
elif args.compile == "reduce-overhead":
    fwd = torch.compile(model, mode="reduce-overhead")
rng = random.Random(7)
try:
    for step in range(args.steps):
        if args.history_from_step and step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        n = args.fixed_len or max(128, min(args.max_len, int(rng.lognormvariate(7.0, 0.6)) // 64 * 64))
        ids = torch.randint(0, 32000, (args.batch, n), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.empty_cache_every and step % args.empty_cache_every == 0:
            torch.cuda.empty_cache()
        print(f"step {step} len {n} loss {loss.item():.3f}", flush=True)
    if args.dump_end:
        torch.cuda.memory._dump_snapshot("snapshot.pickle")
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
