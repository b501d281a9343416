"""FSDP2 (fully_shard) training as torchtitan and the PyTorch FSDP2 tutorial set it up, on one rank:
bf16 parameters for compute, fp32 reduce, AdamW, gradient accumulation. History from --history-from-step
(mid-run, a ring of --max-entries); the snapshot is dumped in the except handler.
"""
import argparse, os, random
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
from transformers import LlamaConfig, LlamaForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-len", type=int, default=4096)
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--history-from-step", type=int, default=4)
p.add_argument("--seed", type=int, default=11)
args = p.parse_args()

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
cfg = LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 128,
                  intermediate_size=args.hidden * 8 // 3 // 64 * 64, vocab_size=32000, max_position_embeddings=8192)
with torch.device("cuda"):
    model = LlamaForCausalLM(cfg)
mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model.model.layers:
    fully_shard(layer, mp_policy=mp)
fully_shard(model, mp_policy=mp)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
rng = random.Random(args.seed)
try:
    for step in range(args.steps):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        for micro in range(args.ga):
            n = max(256, min(args.max_len, int(rng.lognormvariate(7.3, 0.5)) // 64 * 64))
            ids = torch.randint(0, 32000, (args.batch, n), device="cuda")
            loss = model(input_ids=ids, labels=ids).loss / args.ga
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
finally:
    dist.destroy_process_group()
